"""LangGraph's long-term memory store over hybridmem (the ``langgraph`` extra): :class:`HybridMemStore`,
a ``langgraph.store.base.BaseStore`` (docs/integrations.md, "LangGraph (and LangMem)").

How LangGraph's model maps onto hybridmem's:

- **One hybridmem namespace per store** (``hm_namespace``, default ``"langgraph"``). A LangGraph
  namespace tuple lives in each item's metadata, one key per level: ``("memories", "u1")`` is
  ``{"lg.ns.0": "memories", "lg.ns.1": "u1", "lg.depth": 2}``. A prefix is then a conjunction of
  equalities: ``search(("memories",), ...)`` runs behind the pre-filter ``{"lg.ns.0": "memories"}``,
  so one hybrid query covers every user's namespace under it and nothing else.
- **An item is one hybridmem document**, id ``label/label/key`` (each part percent-encoded, so no
  two (namespace, key) pairs share an id). Its metadata holds the value's top-level fields as
  ``v.<field>`` (what a ``filter`` reads), the key (``lg.key``), ``lg.created_at`` /
  ``lg.updated_at`` (ISO 8601 UTC; ``occurred_at`` is the update time, so listings are newest
  first), and TTL bookkeeping. A value with a top-level key that cannot be a metadata key (a quote,
  a backslash, over 126 characters) is kept whole under ``lg.value`` and cannot be filtered on.
- **The document's text is what the index config says to embed**: the texts at ``fields``
  (default ``["$"]``: the whole value as JSON, as LangGraph's stores embed it), joined by blank
  lines, indexed by BM25 *and* embedded. ``put(..., index=False)`` (or a value with no text at the
  paths) stores an unindexed item: found by ``get``, by listing and filters, never ranked by a query
  (like ``InMemoryStore``, such items only fill a query's page after the ranked ones, score None).
- **search with a query** runs hybrid retrieval (BM25 ‖ dense, RRF) with the namespace prefix and
  ``filter`` as pre-filters of every leg; ``SearchItem.score`` is the fused RRF score. Without a
  query it lists the matching items, most recently updated first.
- **list_namespaces** reads one marker document per namespace (``lg.kind: namespace``), written with
  the namespace's first item and removed with its last.
- **TTL** (``supports_ttl``): ``ttl`` minutes set ``lg.expires_at``; reads refresh it
  (``refresh_ttl``, ``TTLConfig.refresh_on_read``); ``omit_expired`` hides expired items at once;
  :meth:`HybridMemStore.sweep_ttl` (or the thread of :meth:`start_ttl_sweeper`, every
  ``sweep_interval_minutes``) deletes them.

Filters: ``{"field": value}`` and LangGraph's operators ``$eq $ne $gt $gte $lt $lte`` on top-level
value fields, plus hybridmem's ``$in $nin $exists`` and ``$and``/``$or`` lists. Comparisons hold
between values of one kind (a number with a number, a string with a string: hybridmem's semantics).
Nested (``{"a": {"b": 1}}``) and list-equality filters are refused with a ValueError naming the field.

In one ``batch``, reads (get, search, list) see the store as it was before the batch's writes,
which are then applied, the last write of a (namespace, key) winning: ``InMemoryStore``'s order.
Invalid namespaces raise LangGraph's :class:`~langgraph.store.base.InvalidNamespaceError`.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future
from datetime import datetime, timezone
from itertools import islice
from pathlib import Path
from typing import Any
from urllib.parse import quote

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
    validate_op_namespace,
)

from hybridmem.embed.base import Embedder
from hybridmem.errors import NotFoundError, ValidationError
from hybridmem.memory import Memory
from hybridmem.models import QueryResult

__all__ = ["HybridMemStore"]

_MAX_TOP_K = 1000  # config.MAX_TOP_K: the most results one query returns (listings page through)
_MAX_ID = 512
_MAX_FIELD_KEY = 126  # a metadata key is at most 128 characters, "v." included
#: LangGraph's filter operators and hybridmem's extras, passed through to the metadata filter
_OPS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists")
#: a listing: the recency leg alone (dense weight 0, a query of no terms), newest first
_LISTING = {"dense_weight": 0.0, "sparse_weight": 1.0, "exact_weight": 0.0, "time_weight": 0.0, "recency_weight": 1.0}


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat()


def _doc_id(namespace: tuple[str, ...], key: str) -> str:
    return "/".join(quote(part, safe="") for part in (*namespace, key))


def _marker_id(namespace: tuple[str, ...]) -> str:
    # an item id never holds a raw ':' (quoted): no marker can share an item's id
    return "ns:" + "/".join(quote(part, safe="") for part in namespace)


def _ns_meta(namespace: tuple[str, ...]) -> dict[str, Any]:
    return {**{f"lg.ns.{i}": label for i, label in enumerate(namespace)}, "lg.depth": len(namespace)}


def _ns_filter(prefix: tuple[str, ...], exact: bool = False, wildcards: bool = False) -> dict[str, Any]:
    """Namespaces under ``prefix`` (``exact``: that one only); with ``wildcards`` (list_namespaces),
    a ``*`` label matches any label; a search's prefix is literal, as in LangGraph's stores."""
    flt: dict[str, Any] = {f"lg.ns.{i}": label for i, label in enumerate(prefix) if not (wildcards and label == "*")}
    if exact:
        flt["lg.depth"] = len(prefix)
    return flt


def _namespace_of(meta: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(meta[f"lg.ns.{i}"]) for i in range(int(meta.get("lg.depth", 0))))


def _valid_field(key: Any) -> bool:
    return (
        isinstance(key, str)
        and 0 < len(key) <= _MAX_FIELD_KEY
        and not any(c in key for c in '"\\')
        and not any(ord(c) < 32 for c in key)
    )


def _value_meta(value: dict[str, Any]) -> dict[str, Any]:
    if all(_valid_field(k) for k in value):
        return {f"v.{k}": v for k, v in value.items()}
    return {"lg.value": value}


def _value_of(meta: dict[str, Any]) -> dict[str, Any]:
    if "lg.value" in meta:
        return dict(meta["lg.value"])
    return {k[2:]: v for k, v in meta.items() if k.startswith("v.")}


def _match(cond: MatchCondition, ns: tuple[str, ...]) -> bool:
    path = tuple(cond.path)
    if len(ns) < len(path):
        return False
    part = ns[: len(path)] if cond.match_type == "prefix" else ns[len(ns) - len(path) :]
    return all(p == "*" or p == n for p, n in zip(path, part, strict=True))


def _field_condition(field: str, cond: Any) -> dict[str, Any]:
    if not _valid_field(field) or field.startswith("$"):
        raise ValueError(f"filter field {field!r}: a top-level value field of 1-{_MAX_FIELD_KEY} characters")
    if isinstance(cond, dict):
        if not cond or not all(isinstance(op, str) and op.startswith("$") for op in cond):
            raise ValueError(
                f"filter field {field!r}: nested filters are not supported (filter on a top-level field, "
                f"with a value or operators {', '.join(_OPS)})"
            )
        return {f"v.{field}": dict(cond)}  # unknown operators: hybridmem's FilterError names them
    if isinstance(cond, (list, tuple)):
        raise ValueError(f"filter field {field!r}: list equality is not supported (use $in)")
    return {f"v.{field}": cond}


def _value_filter(flt: dict[str, Any] | None) -> list[dict[str, Any]]:
    """LangGraph's filter on value fields as hybridmem metadata conditions (to be and-ed)."""
    if not flt:
        return []
    if not isinstance(flt, dict):
        raise ValueError(f"a filter is a dict of value fields, got {type(flt).__name__}")
    out: list[dict[str, Any]] = []
    for key, cond in flt.items():
        if key in ("$and", "$or"):
            if not isinstance(cond, list) or not cond:
                raise ValueError(f"filter {key}: a non-empty list of filters")
            parts = [{"$and": _value_filter(sub) or [{"lg.kind": "item"}]} for sub in cond]
            out.append({key: parts})
        else:
            out.append(_field_condition(key, cond))
    return out


class HybridMemStore(BaseStore):
    """A LangGraph ``BaseStore`` over a hybridmem store: hybrid search (BM25 ‖ dense, RRF) behind
    namespace and value pre-filters, with TTL.

    ``memory``: a :class:`hybridmem.Memory` (shared; :meth:`close` leaves it open), a store path (a
    Memory is opened there with items kept whole, ``chunk_size=None``) or None (a throwaway store
    in a temporary directory). ``embedder``: ``"e5"``, ``"hash"``, an Embedder or a LangChain
    ``Embeddings``; else ``index["embed"]`` (with ``index["dims"]``) when given; else hybridmem's
    default. ``index``: LangGraph's ``IndexConfig``, of which ``fields`` (default ``["$"]``) says what
    to embed. ``ttl``: LangGraph's ``TTLConfig``. ``wait_for_vectors``: a put returns once its
    vectors are stored (off: BM25-searchable at once, embedded in the background)."""

    supports_ttl: bool = True

    def __init__(
        self,
        memory: Memory | str | Path | None = None,
        *,
        embedder: Any = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        hm_namespace: str = "langgraph",
        mode: str = "hybrid",
        hybrid_params: dict[str, Any] | None = None,
        wait_for_vectors: bool = True,
        vector_timeout: float | None = None,
        **memory_options: Any,
    ) -> None:
        self.index_config = index
        self.ttl_config = ttl
        fields = (index or {}).get("fields") or ["$"]
        self._fields = [(p, p if p == "$" else tokenize_path(p)) for p in fields]
        self._owns = not isinstance(memory, Memory)
        if isinstance(memory, Memory):
            self.memory = memory
        else:
            path = memory if memory is not None else Path(tempfile.mkdtemp(prefix="hybridmem-lg-")) / "memory.db"
            spec = self._embedder_spec(embedder, index)
            self.memory = Memory(path, embedder=spec, **{"chunk_size": None, **memory_options})
        self.hm_namespace = hm_namespace
        self.mode = mode
        self.hybrid_params = dict(hybrid_params or {})
        self.wait_for_vectors = wait_for_vectors
        self.vector_timeout = vector_timeout
        self._sweeper: threading.Thread | None = None
        self._sweep_stop = threading.Event()

    @staticmethod
    def _embedder_spec(embedder: Any, index: IndexConfig | None) -> str | Embedder | None:
        from .langchain import LangChainEmbedder, as_embedder  # noqa: PLC0415 - langchain-core: a langgraph dependency

        if embedder is not None:
            return as_embedder(embedder)
        if index and index.get("embed") is not None:
            return LangChainEmbedder(ensure_embeddings(index["embed"]), dim=index.get("dims"))
        return None

    def close(self) -> None:
        """Stop the TTL sweeper; close the Memory this store opened (one it was given stays open)."""
        self.stop_ttl_sweeper()
        if self._owns:
            self.memory.close()

    # ------------------------------------------------------------------ batch
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the ops: reads against the store as it is, then the writes (the last per item wins)."""
        ops = list(ops)
        for op in ops:
            self._check(op)
        results: list[Result] = [None] * len(ops)
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        refresh: dict[str, dict[str, Any]] = {}
        for i, op in enumerate(ops):
            if isinstance(op, GetOp):
                results[i] = self._get(op, refresh)
            elif isinstance(op, SearchOp):
                results[i] = self._search(op, refresh)
            elif isinstance(op, ListNamespacesOp):
                results[i] = self._list_namespaces(op)
            elif isinstance(op, PutOp):
                puts[(tuple(op.namespace), str(op.key))] = op
            else:
                raise ValueError(f"unknown operation type: {type(op).__name__}")
        for key in puts:  # written anyway: no refresh of what the batch overwrites
            refresh.pop(_doc_id(*key), None)
        self._refresh(refresh)
        if puts:
            self._apply_puts(list(puts.values()))
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    @staticmethod
    def _check(op: Op) -> None:
        validate_op_namespace(op)  # labels: strings, not empty, no '.', no NUL
        if isinstance(op, PutOp):
            if not op.namespace:
                raise InvalidNamespaceError("Namespace cannot be empty.")
            if op.namespace[0] == "langgraph":
                raise InvalidNamespaceError(f'Root label for namespace cannot be "langgraph". Got: {op.namespace}')
            if len(_marker_id(tuple(op.namespace))) > _MAX_ID - 8:
                raise InvalidNamespaceError(
                    f"namespace {op.namespace} is too long for hybridmem: its labels, percent-encoded and "
                    f"joined by '/', must stay under {_MAX_ID - 8} characters"
                )
            if len(_doc_id(tuple(op.namespace), str(op.key))) > _MAX_ID:
                raise ValueError(
                    f"key {str(op.key)[:40]!r}...: namespace and key, percent-encoded, exceed hybridmem's "
                    f"{_MAX_ID}-character id limit"
                )
            if op.value is not None and not isinstance(op.value, Mapping):
                raise ValueError(f"a value is a dict (or None to delete), got {type(op.value).__name__}")

    # ------------------------------------------------------------------ reads
    def _now_filter(self) -> list[dict[str, Any]]:
        if not (self.ttl_config or {}).get("omit_expired", False):
            return []
        return [{"$or": [{"lg.expires_at": {"$exists": False}}, {"lg.expires_at": {"$gt": time.time()}}]}]

    def _get(self, op: GetOp, refresh: dict[str, dict[str, Any]]) -> Item | None:
        doc_id = _doc_id(tuple(op.namespace), str(op.key))
        try:
            doc = self.memory.get(doc_id, namespace=self.hm_namespace)
        except (NotFoundError, ValidationError):
            return None
        meta = doc["metadata"]
        if meta.get("lg.kind") != "item":
            return None
        expires = meta.get("lg.expires_at")
        if expires is not None and self._now_filter() and expires <= time.time():
            return None
        if op.refresh_ttl and meta.get("lg.ttl") is not None:
            refresh[doc_id] = {"text": "\n\n".join(c["text"] for c in doc["chunks"]), "metadata": meta}
        return self._item(meta, Item)

    @staticmethod
    def _item(meta: dict[str, Any], cls: type[Any], score: float | None = None) -> Any:
        fields = {
            "namespace": _namespace_of(meta),
            "key": str(meta["lg.key"]),
            "value": _value_of(meta),
            "created_at": datetime.fromisoformat(meta["lg.created_at"]),
            "updated_at": datetime.fromisoformat(meta["lg.updated_at"]),
        }
        return cls(**fields) if cls is Item else cls(**fields, score=score)

    def _query(
        self, text: str, flt: list[dict[str, Any]], k: int, hybrid: dict[str, Any], mode: str = "hybrid"
    ) -> list[QueryResult]:
        """One query of the contract over the store's namespace; one result per item, best first."""
        response = self.memory.search(
            {
                "search_text": text,
                "top_k": k,
                "mode": mode,
                "hybrid_params": hybrid,
                "metadata_filter": {"$and": [f for f in flt if f]},
                "namespace": self.hm_namespace,
            }
        )
        seen: set[str] = set()
        out = []
        for r in response.results:
            if r.doc_id not in seen:
                seen.add(r.doc_id)
                out.append(r)
        return out

    def _scan(self, flt: list[dict[str, Any]], page: int = _MAX_TOP_K) -> Iterator[dict[str, Any]]:
        """The metadata of every document the filter allows, most recently written first: pages of
        the recency leg (``page`` results, then 1000), each no newer than the last, without repeats."""
        seen: set[str] = set()
        bound: list[dict[str, Any]] = []
        while True:
            fresh = 0
            for r in self._query("*", flt + bound, max(1, min(page, _MAX_TOP_K)), _LISTING):
                if r.doc_id in seen:
                    continue
                seen.add(r.doc_id)
                fresh += 1
                yield r.metadata
                bound = [{"lg.t": {"$lte": r.metadata.get("lg.t", 0.0)}}]
            if fresh == 0:
                return
            page = _MAX_TOP_K

    def _search(self, op: SearchOp, refresh: dict[str, dict[str, Any]]) -> list[SearchItem]:
        if op.limit <= 0 or op.offset < 0:
            return []
        flt = [{"lg.kind": "item"}, _ns_filter(tuple(op.namespace_prefix))] + _value_filter(op.filter)
        flt += self._now_filter()
        want = op.offset + op.limit
        items: list[tuple[dict[str, Any], float | None]] = []
        if op.query:
            if want > _MAX_TOP_K:
                raise ValueError(f"offset + limit of a query is at most {_MAX_TOP_K}, got {want}")
            hits = self._query(op.query, [*flt, {"lg.indexed": True}], want, self.hybrid_params, self.mode)
            items = [(r.metadata, float(r.rrf_score)) for r in hits[op.offset :]]
            if len(items) < op.limit:  # unindexed items fill the page after the ranked ones
                rest = self._scan([*flt, {"lg.indexed": False}], op.limit - len(items))
                items += [(m, None) for m in islice(rest, op.limit - len(items))]
        else:
            scan = self._scan(flt, want)
            items = [(m, None) for m in list(islice(scan, want))[op.offset :]]
        out = [self._item(m, SearchItem, score) for m, score in items[: op.limit]]
        if op.refresh_ttl:
            for m, _ in items[: op.limit]:
                if m.get("lg.ttl") is not None:
                    refresh[_doc_id(_namespace_of(m), str(m["lg.key"]))] = {"metadata": m}
        return out

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conds = list(op.match_conditions or ())
        flt: list[dict[str, Any]] = [{"lg.kind": "namespace"}]
        for c in conds:
            if c.match_type == "prefix":
                flt.append(_ns_filter(tuple(c.path), wildcards=True))
        names = {ns for ns in (_namespace_of(m) for m in self._scan(flt)) if all(_match(c, ns) for c in conds)}
        if op.max_depth is not None:
            names = {ns[: op.max_depth] for ns in names}
        return sorted(names)[op.offset : op.offset + op.limit]

    # ------------------------------------------------------------------ writes
    def _text(self, op: PutOp, value: dict[str, Any]) -> str:
        if op.index is False:
            return ""
        paths = self._fields if op.index is None else [(p, p if p == "$" else tokenize_path(p)) for p in op.index]
        texts = [t for _, path in paths for t in get_text_at_path(value, path)]
        return "\n\n".join(t for t in texts if t.strip())

    def _ttl_meta(self, ttl: float | None, now: float) -> dict[str, Any]:
        if ttl is None:
            return {}
        return {"lg.ttl": float(ttl), "lg.expires_at": now + float(ttl) * 60.0}

    def _put_document(self, op: PutOp, now: float) -> dict[str, Any]:
        ns, key = tuple(op.namespace), str(op.key)
        doc_id = _doc_id(ns, key)
        value = dict(op.value or {})
        try:
            created = self.memory.get(doc_id, namespace=self.hm_namespace)["metadata"].get("lg.created_at")
        except NotFoundError:
            created = None
        text = self._text(op, value)
        meta = {
            "lg.kind": "item",
            **_ns_meta(ns),
            "lg.key": key,
            "lg.created_at": created or _iso(now),
            "lg.updated_at": _iso(now),
            "lg.t": now,
            "lg.indexed": bool(text),
            **self._ttl_meta(op.ttl, now),
            **_value_meta(value),
        }
        # an unindexed item still needs a text: its path (queries never rank it: lg.indexed false)
        return {"id": doc_id, "text": text or "/".join((*ns, key)), "metadata": meta, "occurred_at": now}

    def _marker(self, ns: tuple[str, ...], now: float) -> dict[str, Any] | None:
        try:
            self.memory.get(_marker_id(ns), namespace=self.hm_namespace)
            return None
        except NotFoundError:
            meta = {"lg.kind": "namespace", **_ns_meta(ns), "lg.t": now}
            return {"id": _marker_id(ns), "text": "/".join(ns), "metadata": meta, "occurred_at": now}

    def _apply_puts(self, puts: list[PutOp]) -> None:
        now = time.time()
        docs: list[dict[str, Any]] = []
        deletes = [_doc_id(tuple(op.namespace), str(op.key)) for op in puts if op.value is None]
        for op in puts:
            if op.value is not None:
                docs.append(self._put_document(op, now))
        for ns in dict.fromkeys(tuple(op.namespace) for op in puts if op.value is not None):
            marker = self._marker(ns, now)
            if marker is not None:
                docs.append(marker)
        self._write(docs)
        if deletes:
            self.memory.delete(deletes, namespace=self.hm_namespace)
            self._drop_empty_markers({tuple(op.namespace) for op in puts if op.value is None})

    def _write(self, docs: list[dict[str, Any]]) -> None:
        if not docs:
            return
        try:
            # one transaction: a batch's writes land together or not at all
            self.memory.add_documents(docs, namespace=self.hm_namespace, batch_size=len(docs))
        except ValidationError as e:
            raise ValidationError(f"hybridmem refused the item: {e}") from None
        if self.wait_for_vectors:
            self.memory.wait_for_vectors(self.vector_timeout)

    def _drop_empty_markers(self, namespaces: Iterable[tuple[str, ...]]) -> None:
        empty = []
        for ns in namespaces:
            if next(self._scan([{"lg.kind": "item"}, _ns_filter(ns, exact=True)], 1), None) is None:
                empty.append(_marker_id(ns))
        if empty:
            self.memory.delete(empty, namespace=self.hm_namespace)

    def _refresh(self, refresh: dict[str, dict[str, Any]]) -> None:
        """Push the expiry of the items read (``refresh_ttl``) to now + their TTL."""
        if not refresh:
            return
        now = time.time()
        docs = []
        for doc_id, entry in refresh.items():
            meta = dict(entry["metadata"])
            text = entry.get("text")
            if text is None:
                try:
                    doc = self.memory.get(doc_id, namespace=self.hm_namespace)
                except NotFoundError:
                    continue
                text = "\n\n".join(c["text"] for c in doc["chunks"])
            meta["lg.expires_at"] = now + float(meta["lg.ttl"]) * 60.0
            docs.append({"id": doc_id, "text": text, "metadata": meta, "occurred_at": meta.get("lg.t", now)})
        self._write(docs)

    # ------------------------------------------------------------------ TTL
    def sweep_ttl(self) -> int:
        """Delete the items whose TTL has run out; returns how many."""
        now = time.time()
        expired = list(self._scan([{"lg.kind": "item"}, {"lg.expires_at": {"$lte": now}}]))
        if not expired:
            return 0
        self.memory.delete([_doc_id(_namespace_of(m), str(m["lg.key"])) for m in expired], namespace=self.hm_namespace)
        self._drop_empty_markers({_namespace_of(m) for m in expired})
        return len(expired)

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> Future[None]:
        """Sweep expired items every ``sweep_interval_minutes`` (default: the TTLConfig's, else 5) in a
        daemon thread until :meth:`stop_ttl_sweeper`; the future completes when it stops."""
        interval = sweep_interval_minutes or (self.ttl_config or {}).get("sweep_interval_minutes") or 5
        done: Future[None] = Future()
        if self._sweeper is not None and self._sweeper.is_alive():
            done.set_result(None)
            return done
        self._sweep_stop.clear()

        def loop() -> None:
            try:
                while not self._sweep_stop.wait(float(interval) * 60.0):
                    self.sweep_ttl()
            finally:
                done.set_result(None)

        self._sweeper = threading.Thread(target=loop, name="hybridmem-lg-ttl", daemon=True)
        self._sweeper.start()
        return done

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper thread; True when it has stopped (or never ran)."""
        self._sweep_stop.set()
        if self._sweeper is None:
            return True
        self._sweeper.join(timeout)
        stopped = not self._sweeper.is_alive()
        if stopped:
            self._sweeper = None
        return stopped

    def __repr__(self) -> str:
        return f"<HybridMemStore {self.memory.path} namespace={json.dumps(self.hm_namespace)}>"
