"""The reads of :class:`~hybridmem.integrations.langgraph.HybridMemStore` (a mixin): get, hybrid
search and listings behind the namespace and value pre-filters, namespace listings."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from itertools import islice
from typing import Any

from langgraph.store.base import GetOp, Item, ListNamespacesOp, SearchItem, SearchOp, TTLConfig

from hybridmem.errors import NotFoundError, ValidationError
from hybridmem.memory import Memory
from hybridmem.models import QueryResult

from .langgraph_mapping import (
    _MAX_TOP_K,
    _doc_id,
    _match,
    _namespace_of,
    _ns_filter,
    _value_filter,
    _value_of,
)


class StoreReads:
    """Reads against the store as it is; what a read refreshes (``refresh_ttl``) is collected in
    ``refresh`` for the writes half to apply."""

    memory: Memory
    hm_namespace: str
    mode: str
    hybrid_params: dict[str, Any]
    ttl_config: TTLConfig | None

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
        """The metadata of every document the filter allows, most recently written first (its
        ``occurred_at`` is the put's time; one batch's puts, equal, by id descending):
        ``Memory.list``'s keyset pages (``page`` documents, then 1,000), exact under concurrent
        writes (no document present for the whole walk skipped or repeated)."""
        cursor: str | None = None
        limit = max(1, min(page, _MAX_TOP_K))
        while True:
            got = self.memory.list(
                cursor,
                limit,
                namespace=self.hm_namespace,
                metadata_filter={"$and": [f for f in flt if f]},
                order="occurred_at",
                descending=True,
            )
            for m in got.memories:
                yield m["metadata"]
            if got.next_cursor is None:
                return
            cursor, limit = got.next_cursor, _MAX_TOP_K

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
