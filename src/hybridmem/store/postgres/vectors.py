"""The PostgreSQL store's vectors: the embedder's column type and its HNSW index, the embedding
queue, storing vectors (binary COPY) and reading them back (binary results)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from ...errors import ValidationError
from ..base import WriteResult
from .core import _Core
from .schema import HNSW_EF_CONSTRUCTION, HNSW_M, PENDING_RECOUNT, _by_ids, _now, _one
from .wire import copy_vectors_binary, vectors_binary

__all__ = ["_Vectors"]


class _Vectors(_Core):
    """Vectors, their index and the queue of chunks waiting for one."""

    # ------------------------------------------------------------------ embedder and index
    def set_embedder(self, name: str, dim: int | None, *, reset_vectors: bool = False) -> None:
        """Record the embedder and type the vector column ``vector(dim)`` with its HNSW index; with
        ``reset_vectors`` drop every vector and queue every chunk."""
        self._dim_cache = None
        with self._wlock, self._conn(write=True) as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('hybridmem-embedder'))")
            conn.execute(
                "INSERT INTO meta VALUES ('embedder', %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (name,),
            )
            old = conn.execute("SELECT value FROM meta WHERE key='dim'").fetchone()
            if dim:
                conn.execute(
                    "INSERT INTO meta VALUES ('dim', %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (str(int(dim)),),
                )
            else:
                conn.execute("DELETE FROM meta WHERE key='dim'")
            if reset_vectors:
                conn.execute("DELETE FROM vectors")
                conn.execute(
                    "INSERT INTO embed_queue (ns_id, chunk_rowid, enqueued_at) SELECT ns_id, id, %s FROM chunks "
                    "ON CONFLICT DO NOTHING",
                    (_now(),),
                )
                conn.execute(PENDING_RECOUNT)
                conn.execute("UPDATE namespace_stats SET vec_version = vec_version + 1")
            if dim and (old is None or int(old[0]) != int(dim) or reset_vectors):
                conn.execute("DROP INDEX IF EXISTS vectors_hnsw")
                if conn.execute("SELECT 1 FROM vectors LIMIT 1").fetchone() is not None:
                    raise ValidationError(
                        f"the store holds vectors of dimension {old[0] if old else '?'}; "
                        f"re-embed (reset_vectors) to change to {dim}"
                    )
                conn.execute(f"ALTER TABLE vectors ALTER COLUMN embedding TYPE vector({int(dim)})")
                conn.execute(
                    f"CREATE INDEX vectors_hnsw ON vectors USING hnsw (embedding vector_cosine_ops) "
                    f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION})"
                )

    def drop_vector_index(self) -> None:
        """Drop the HNSW index (before a bulk load: building it once afterwards is much faster than
        inserting a million vectors into it one by one). Dense search stays exact until rebuilt."""
        with self._wlock, self._conn(write=True, record=False) as conn:
            conn.execute("DROP INDEX IF EXISTS vectors_hnsw")

    def create_vector_index(
        self, *, m: int = HNSW_M, ef_construction: int = HNSW_EF_CONSTRUCTION, maintenance_work_mem: str = "1GB"
    ) -> None:
        """(Re)build the HNSW index (cosine) over every vector; give the build enough
        ``maintenance_work_mem`` to keep the graph in memory (about 1.5 × the vectors' size)."""
        if not re.fullmatch(r"\d+\s*(kB|MB|GB)", maintenance_work_mem):
            raise ValidationError(f"maintenance_work_mem {maintenance_work_mem!r}: expected e.g. '2GB'")
        with self._wlock, self._conn(write=True, record=False) as conn:
            conn.execute(f"SET maintenance_work_mem = '{maintenance_work_mem}'")
            conn.execute("DROP INDEX IF EXISTS vectors_hnsw")
            conn.execute("SET statement_timeout = 0")  # a build may take longer than any query may
            conn.execute(
                f"CREATE INDEX vectors_hnsw ON vectors USING hnsw (embedding vector_cosine_ops) "
                f"WITH (m = {int(m)}, ef_construction = {int(ef_construction)})"
            )
            conn.execute("ANALYZE vectors")
            conn.execute("RESET statement_timeout")
            conn.execute("RESET maintenance_work_mem")

    # ------------------------------------------------------------------ embedding queue
    def pending(self, limit: int) -> list[tuple[int, str, str, str]]:
        """(rowid, namespace, text, text_hash) of chunks waiting for a vector, oldest first."""
        with self._conn() as conn:
            return conn.execute(
                "SELECT c.id, n.name, CASE WHEN c.context IS NULL THEN c.text ELSE c.context || E'\\n' || c.text END, "
                "c.text_hash FROM embed_queue q JOIN chunks c ON c.id = q.chunk_rowid "
                "JOIN namespaces n ON n.id = c.ns_id ORDER BY q.chunk_rowid LIMIT %s",
                (limit,),
            ).fetchall()

    def pending_among(self, rowids: Sequence[int], namespace: str | None = None) -> set[int]:
        """The chunks among ``rowids`` (of ``namespace`` when given) that still wait for their vector."""
        ns = self._scope(namespace)
        if not rowids or ns == -1:
            return set()
        where, params = _by_ids("chunk_rowid", ns, rowids)
        with self._conn() as conn:
            rows = conn.execute(f"SELECT chunk_rowid FROM embed_queue WHERE {where}", params).fetchall()
        return {int(r[0]) for r in rows}

    def store_vectors(self, items: Sequence[tuple[int, str, np.ndarray]]) -> WriteResult:
        """Store vectors for (rowid, text_hash, vec); skips chunks deleted or changed meanwhile."""
        res = WriteResult()
        if not items:
            return res
        name, dim = self.embedder_info_cached()
        if not dim:  # the first vectors fix the dimension: type the column and build its index
            dim = int(np.asarray(items[0][2]).ravel().shape[0])
            self.set_embedder(name or "unknown", dim)
        # the embedding worker's: not a caller's write that read_your_writes waits for
        with self._wlock, self._conn(write=True, record=False) as conn, conn.transaction():
            rids = [int(r) for r, _, _ in items]
            live = {
                r: (ns, th)
                for r, ns, th in conn.execute(
                    "SELECT id, ns_id, text_hash FROM chunks WHERE id = ANY(%s) FOR UPDATE", (rids,)
                )
            }
            # dequeue what is stored or gone; a chunk whose text changed meanwhile stays queued
            done = [r for r, th, _ in items if int(r) not in live or live[int(r)][1] == th]
            gone = conn.execute(
                "DELETE FROM embed_queue WHERE chunk_rowid = ANY(%s) RETURNING ns_id", ([int(r) for r in done],)
            ).fetchall()
            unqueued = Counter(int(r[0]) for r in gone)
            for ns in sorted(unqueued):  # in namespace order, as every writer locks them
                conn.execute("UPDATE namespace_stats SET n_pending = n_pending - %s WHERE ns_id=%s", (unqueued[ns], ns))
            rows: list[tuple[int, int, np.ndarray]] = []
            by_ns: dict[int, list[int]] = {}
            for rid, th, vec in items:
                got = live.get(int(rid))
                if got is None or got[1] != th:
                    continue
                v = np.asarray(vec, np.float32).ravel()
                if dim and v.shape[0] != dim:
                    raise ValidationError(f"vector for chunk {rid} has dimension {v.shape[0]}, the store's is {dim}")
                rows.append((int(rid), got[0], v))
                by_ns.setdefault(got[0], []).append(int(rid))
            conn.execute("DELETE FROM vectors WHERE chunk_rowid = ANY(%s)", ([r[0] for r in rows],))  # re-embedding
            with conn.cursor() as cur:
                copy_vectors_binary(cur, rows)
            names = dict(conn.execute("SELECT id, name FROM namespaces WHERE id = ANY(%s)", (list(by_ns),)).fetchall())
            for ns in sorted(by_ns):
                self._changed(conn, names[ns], ns, "vec_version", by_ns[ns], [], res)
        return res

    # ------------------------------------------------------------------ reads
    def load_vectors(
        self, namespace: str, alloc: Callable[[int, int], np.ndarray] | None = None
    ) -> tuple[int, np.ndarray, np.ndarray]:
        ns = self.namespace_id(namespace)
        dim = self.embedder_info()[1] or 0
        if ns is None:
            return 0, np.zeros(0, np.int64), np.zeros((0, dim), np.float32)
        with self.snapshot() as db:
            version = int(
                _one(db.execute("SELECT vec_version FROM namespace_stats WHERE ns_id=?", (ns,)).fetchone())[0]
            )
            ids, m = vectors_binary(
                db.conn, "SELECT chunk_rowid, embedding FROM vectors WHERE ns_id=%s ORDER BY chunk_rowid", (ns,)
            )
        if not len(ids):
            return version, np.zeros(0, np.int64), np.zeros((0, dim), np.float32)
        if alloc is not None:  # this backend's dense leg is pgvector's: no large local load to spare
            out = alloc(*m.shape)
            out[:] = m
            m = out
        return version, ids, m

    def vectors_for(self, rowids: Sequence[int], namespace: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        ns = self._scope(namespace)
        where, params = _by_ids("chunk_rowid", ns, [] if ns == -1 else rowids)
        with self._conn() as conn:
            return vectors_binary(
                conn, f"SELECT chunk_rowid, embedding FROM vectors WHERE {where} ORDER BY chunk_rowid", params
            )
