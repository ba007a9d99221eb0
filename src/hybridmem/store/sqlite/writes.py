"""The SQLite store's writes, each in one transaction: documents (their chunks, BM25 token rows,
vectors kept or queued), vectors, re-tokenizing; and the steps of the deletes, retiring and
restored times that store/sql/writes.py does for both SQL stores."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import StoreError, ValidationError
from ..base import META_JSON, PreparedDocument, WriteResult, plan_writes
from ..sql import history as history_sql
from ..sql.graph import delete_graph_provenance
from .core import _Core
from .schema import _now, _select_in, _tokens

__all__ = ["_Writes"]


@dataclass
class _Changes:
    """What one write changed, for the version counters and the change log (``_log_changes``)."""

    added_vecs: list[int] = field(default_factory=list)
    removed_vecs: list[int] = field(default_factory=list)
    added_chunks: list[int] = field(default_factory=list)
    removed_chunks: list[int] = field(default_factory=list)
    retired: list[int] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)


@dataclass
class _Rows:
    """The rows a write inserts, written table by table with one ``executemany`` each (per-row
    statements were most of a bulk ingest's SQL time). Chunk rowids are given here, as SQLite would
    (the largest + 1), so that the tokens, vectors and queue rows can name them before the insert."""

    next_id: int
    documents: list[tuple[Any, ...]] = field(default_factory=list)
    chunks: list[tuple[Any, ...]] = field(default_factory=list)
    tokens: list[tuple[int, str]] = field(default_factory=list)
    vectors: list[tuple[int, bytes]] = field(default_factory=list)
    queue: list[tuple[int, str]] = field(default_factory=list)

    def flush(self, db: sqlite3.Connection, ns: int) -> None:
        tokens = _tokens(ns)
        if self.documents:
            db.executemany(
                "INSERT INTO documents (ns_id, doc_id, source, metadata, content_hash, n_chunks, created_at, "
                "updated_at, occurred_at, recorded_at, version, mem_key, change_reason) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                self.documents,
            )
        if self.chunks:
            db.executemany(
                "INSERT INTO chunks (id, ns_id, chunk_id, doc_id, ord, text, text_hash, lang, source,"
                " created_at, updated_at, context) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                self.chunks,
            )
        if self.tokens:
            db.executemany(f"INSERT INTO {tokens} (rowid, tokens) VALUES (?, ?)", self.tokens)
        if self.vectors:
            db.executemany("INSERT INTO vectors VALUES (?, ?)", self.vectors)
        if self.queue:
            db.executemany("INSERT INTO embed_queue VALUES (?, ?)", self.queue)
            db.execute("UPDATE namespaces SET n_pending = n_pending + ? WHERE id=?", (len(self.queue), ns))
        for rows in (self.documents, self.chunks, self.tokens, self.vectors, self.queue):
            rows.clear()


class _Writes(_Core):
    """The writes of the store but the shared ones (store/sql/writes.py)."""

    def write_documents(self, namespace: str, docs: Sequence[PreparedDocument]) -> WriteResult:
        """Insert or replace documents in one transaction. Chunks whose text did not change keep
        their vectors; other chunks are queued for embedding. A document with ``keep_history``
        retires the version it replaces (``store.history_sql``) instead of dropping it."""
        res = WriteResult()
        if not docs:
            return res
        now, at = _now(), history_sql.now_epoch()
        with self._wlock:
            try:
                with self._tx() as db:
                    ns = self.namespace_id(namespace, db, create=True)
                    assert ns is not None
                    acc = _Changes()
                    existing = self._existing(db, ns, [d.doc_id for d in docs])
                    plan = plan_writes(docs, existing, now, res)
                    replaced = set(plan.replaced)
                    # a new id continues the numbering of its retired versions; no write of this
                    # batch can retire a version of an id the store did not hold when it began
                    versions = history_sql.last_retired(
                        db, ns, [d.doc_id for d, _ in plan.writes if d.doc_id not in replaced]
                    )
                    rows = _Rows(self._next_rowid(db))
                    for d, created in plan.writes:
                        replacing = d.doc_id in replaced
                        if replacing or d.mem_key:  # reads what the batch wrote so far: write it first
                            rows.flush(db, ns)
                        version = versions.get(d.doc_id, 0) + 1
                        self._write_one(db, ns, d, created, replacing, version, (now, at), res, acc, rows)
                    rows.flush(db, ns)
                    db.executemany(
                        "INSERT OR IGNORE INTO metadata_keys VALUES (?, ?)", [(ns, k) for k in sorted(acc.keys)]
                    )
                    self._log_changes(db, namespace, ns, acc, res)
            except sqlite3.IntegrityError as e:
                raise ValidationError(f"write rejected by the store: {e}") from None
            except sqlite3.OperationalError as e:
                raise StoreError(f"write to {self.path} failed: {e}") from e
            self._ns_cache.pop(namespace, None)
        return res

    def _log_changes(self, db: sqlite3.Connection, namespace: str, ns: int, acc: "_Changes", res: WriteResult) -> None:
        """Bump the version counters and log what changed for in-process indexes and filter caches;
        a retired chunk is logged as removed and added again (its visibility changed, its rows not)."""
        if acc.added_vecs or acc.removed_vecs:
            self._changed(db, namespace, ns, "vec_version", acc.added_vecs, acc.removed_vecs, res)
        added, removed = acc.added_chunks + acc.retired, acc.removed_chunks + acc.retired
        if added or removed:
            self._changed(db, namespace, ns, "chunk_version", added, removed, res)

    def _write_one(
        self,
        db: sqlite3.Connection,
        ns: int,
        d: PreparedDocument,
        created: str,
        replacing: bool,
        version: int,
        when: tuple[str, float],
        res: WriteResult,
        acc: "_Changes",
        rows: "_Rows",
    ) -> None:
        """One document's rows, in the caller's transaction: the version it replaces dropped or
        retired, the memory holding its key retired (at once), then its document, chunks, tokens and
        vectors (into ``rows``, written by its next flush). ``version``: the document's when it is new."""
        now, at = when
        old_vecs: dict[str, bytes] = {}
        if d.mem_key:
            holder = history_sql.current_by_key(db, ns, d.mem_key)
            if holder is not None and holder != d.doc_id:
                retired = history_sql.retire(db, ns, holder, at, f"superseded by {d.doc_id} (same key)")
                acc.retired += retired[1] if retired else []
        if replacing:
            old = db.execute(
                "SELECT c.id, c.text_hash, v.vec FROM chunks c LEFT JOIN vectors v "
                "ON v.chunk_rowid = c.id WHERE c.ns_id=? AND c.doc_id=?",
                (ns, d.doc_id),
            ).fetchall()
            old_vecs = {h: v for _, h, v in old if v is not None}
            row = db.execute("SELECT version FROM documents WHERE ns_id=? AND doc_id=?", (ns, d.doc_id)).fetchone()
            version = int(row[0]) + 1 if row else 1  # (retired under its key by an earlier write of the batch: 1)
            if d.keep_history:
                retired = history_sql.retire(db, ns, d.doc_id, at, None)
                acc.retired += retired[1] if retired else []
            else:
                acc.removed_vecs += [i for i, _, v in old if v is not None]
                acc.removed_chunks += [i for i, _, _ in old]
                self._delete_chunk_rows(db, ns, [i for i, _, _ in old])
                db.execute("DELETE FROM documents WHERE ns_id=? AND doc_id=?", (ns, d.doc_id))
        meta_json = META_JSON(d.metadata) if d.metadata else "{}"
        rows.documents.append(
            (ns, d.doc_id, d.source, meta_json, d.content_hash, len(d.chunks), created, now)
            + (d.occurred_at if d.occurred_at is not None else at, at, version, d.mem_key, d.reason)
        )
        acc.keys.update(d.metadata)
        for i, (text, toks, lang, th) in enumerate(zip(d.chunks, d.tokens, d.langs, d.text_hashes), start=1):
            rid = rows.next_id
            rows.next_id += 1
            rows.chunks.append((rid, ns, d.chunk_id(i), d.doc_id, i, text, th, lang, d.source, created, now, d.context))
            rows.tokens.append((rid, toks))
            acc.added_chunks.append(rid)
            if d.vectors is not None:  # precomputed: stored as given, never queued
                rows.vectors.append((rid, np.asarray(d.vectors[i - 1], np.float32).tobytes()))
                acc.added_vecs.append(rid)
            elif th in old_vecs:
                rows.vectors.append((rid, old_vecs[th]))
                acc.added_vecs.append(rid)
                res.vectors_reused += 1
            else:
                rows.queue.append((rid, now))
            res.chunks_written += 1

    @staticmethod
    def _existing(db: sqlite3.Connection, ns: int, doc_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        """doc id -> (content hash, created_at) of the stored documents among ``doc_ids``."""
        sql = "SELECT doc_id, content_hash, created_at FROM documents WHERE ns_id=? AND doc_id IN ({marks})"
        return {r[0]: (r[1], r[2]) for r in _select_in(db, sql, list(dict.fromkeys(doc_ids)), (ns,))}

    @staticmethod
    def _next_rowid(db: sqlite3.Connection) -> int:
        """The rowid SQLite would give the next chunk (the largest one + 1), in the write transaction."""
        return int(db.execute("SELECT coalesce(max(id), 0) + 1 FROM chunks").fetchone()[0])

    @contextmanager
    def _namespace_write(self, namespace: str) -> Iterator[tuple[sqlite3.Connection, int | None]]:
        """The write transaction of the shared writes (store/sql/writes.py) and the namespace's id."""
        with self.write_transaction() as db:
            yield db, self.namespace_id(namespace, db)

    @staticmethod
    def _vector_rowids(db: sqlite3.Connection, ns: int, rowids: list[int]) -> list[int]:
        """Those of ``rowids`` that have a vector."""
        q = ",".join("?" * len(rowids))
        return [r[0] for r in db.execute(f"SELECT chunk_rowid FROM vectors WHERE chunk_rowid IN ({q})", rowids)]

    @staticmethod
    def _drop_emptied_document(db: sqlite3.Connection, ns: int, doc_id: str) -> None:
        """Delete the document ``doc_id`` when it has no chunk left."""
        doc_row = db.execute(
            "SELECT doc_id FROM documents d WHERE ns_id=? AND NOT EXISTS "
            "(SELECT 1 FROM chunks c WHERE c.ns_id=d.ns_id AND c.doc_id=d.doc_id) AND doc_id=?",
            (ns, doc_id),
        ).fetchone()
        if doc_row:
            db.execute("DELETE FROM documents WHERE ns_id=? AND doc_id=?", (ns, doc_row[0]))

    @staticmethod
    def _delete_chunk_rows(db: sqlite3.Connection, ns: int, rowids: list[int]) -> None:
        """Delete chunks of namespace ``ns`` with their tokens, vectors, queue places and graph provenance."""
        tokens = _tokens(ns)
        unqueued = 0
        for i in range(0, len(rowids), 500):
            part = rowids[i : i + 500]
            q = ",".join("?" * len(part))
            delete_graph_provenance(db, part)
            db.execute(f"DELETE FROM {tokens} WHERE rowid IN ({q})", part)
            db.execute(f"DELETE FROM vectors WHERE chunk_rowid IN ({q})", part)
            unqueued += db.execute(f"DELETE FROM embed_queue WHERE chunk_rowid IN ({q})", part).rowcount
            db.execute(f"DELETE FROM chunks WHERE id IN ({q})", part)
        if unqueued:
            db.execute("UPDATE namespaces SET n_pending = n_pending - ? WHERE id=?", (unqueued, ns))

    def reindex_sparse(self) -> int:
        """Rebuild every BM25 table from chunk text (after a tokenizer change)."""
        from ...text.tokenize import index_tokens

        n = 0
        with self.write_transaction() as db:
            for (ns,) in db.execute("SELECT id FROM namespaces").fetchall():
                tok = _tokens(ns)
                db.execute(f"DELETE FROM {tok}")
                rows = db.execute("SELECT id, text, lang, context FROM chunks WHERE ns_id=?", (ns,)).fetchall()
                db.executemany(
                    f"INSERT INTO {tok} (rowid, tokens) VALUES (?, ?)",
                    [(rid, " ".join(index_tokens(text, lang, ctx))) for rid, text, lang, ctx in rows],
                )
                self._bump(db, ns, "chunk_version")
                n += len(rows)
        return n

    def store_vectors(self, items: Sequence[tuple[int, str, np.ndarray]]) -> WriteResult:
        """Store vectors for (rowid, text_hash, vec); skips chunks deleted or changed meanwhile."""
        res = WriteResult()
        with self.write_transaction() as db:
            by_ns: dict[int, list[int]] = {}
            sql = "SELECT id, ns_id, text_hash FROM chunks WHERE id IN ({marks})"
            held = {r[0]: (r[1], r[2]) for r in _select_in(db, sql, list(dict.fromkeys(rid for rid, _, _ in items)))}
            done: list[tuple[int]] = []
            rows: dict[int, bytes] = {}
            for rid, th, vec in items:
                row = held.get(rid)
                if row is not None and row[1] != th:
                    # changed meanwhile (SQLite may even give a new chunk the rowid of a deleted
                    # one): its queue entry stays, for the new text's vector
                    continue
                done.append((rid,))
                if row is None:
                    continue
                if rid not in rows:
                    by_ns.setdefault(row[0], []).append(rid)
                rows[rid] = np.asarray(vec, np.float32).tobytes()  # the same chunk twice: the last vector
            unqueued: dict[int, int] = {}
            for (rid,) in done:
                if db.execute("DELETE FROM embed_queue WHERE chunk_rowid=?", (rid,)).rowcount and rid in held:
                    unqueued[held[rid][0]] = unqueued.get(held[rid][0], 0) + 1
            db.executemany(
                "UPDATE namespaces SET n_pending = n_pending - ? WHERE id=?", [(n, ns) for ns, n in unqueued.items()]
            )
            db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", list(rows.items()))
            names = dict(db.execute("SELECT id, name FROM namespaces").fetchall())
            for ns, rids in by_ns.items():
                self._changed(db, names[ns], ns, "vec_version", rids, [], res)
        return res
