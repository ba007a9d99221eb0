"""The writes of :class:`~hybridmem.integrations.langgraph.HybridMemStore` (a mixin): puts and
deletes in one transaction, namespace markers, TTL refreshes, the TTL sweep and its thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future
from typing import Any

from langgraph.store.base import PutOp, get_text_at_path, tokenize_path

from hybridmem.errors import NotFoundError, ValidationError

from .langgraph_mapping import _doc_id, _iso, _marker_id, _namespace_of, _ns_filter, _ns_meta, _value_meta
from .langgraph_reads import StoreReads


class StoreWrites(StoreReads):
    """Writes and TTL; reads (``_scan``) come from :class:`StoreReads`."""

    _fields: list[tuple[str, Any]]
    wait_for_vectors: bool
    vector_timeout: float | None
    _sweeper: threading.Thread | None
    _sweep_stop: threading.Event

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
