"""The PostgreSQL store's writes, each in one transaction under the namespace's row lock: documents
(the rows of chunks, BM25 postings and statistics, vectors kept or queued, bulk-copied),
re-tokenizing, the ANALYZE after bulk writes; and the steps of the deletes, retiring and restored
times that store/sql/writes.py does for both SQL stores."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import errors as pgerr

from ...errors import StoreError, ValidationError
from ..base import PreparedDocument, WriteResult, plan_writes
from ..sql import graph as graph_sql
from ..sql import history as history_sql
from .core import _Core
from .qmark import Qmark
from .schema import _now

__all__ = ["_Writes"]


class _Writes(_Core):
    """The writes of the store but the vectors' (``vectors.py``) and the shared ones."""

    def write_documents(self, namespace: str, docs: Sequence[PreparedDocument]) -> WriteResult:
        """Insert or replace documents in one transaction. Chunks whose text did not change keep
        their vectors; other chunks are queued for embedding."""
        res = WriteResult()
        if not docs:
            return res
        now, at = _now(), history_sql.now_epoch()
        try:
            with self._wlock, self._conn(write=True) as conn, conn.transaction():
                ns = self._lock_ns(conn, namespace, create=True)
                assert ns is not None
                ids = [d.doc_id for d in docs]
                existing = {
                    r[0]: (r[1], r[2])
                    for r in conn.execute(
                        "SELECT doc_id, content_hash, created_at FROM documents WHERE ns_id=%s AND doc_id = ANY(%s)",
                        (ns, ids),
                    )
                }
                plan = plan_writes(docs, existing, now, res)
                todo, replaced = plan.writes, plan.replaced
                old_vecs: dict[tuple[str, str], str] = {}  # (doc_id, text_hash) -> vector text
                removed_chunks: list[int] = []
                removed_vecs: list[int] = []
                versions: dict[str, int] = {}
                kept = {d.doc_id for d, _ in todo if d.keep_history}  # replaced versions retired, not dropped
                if replaced:
                    versions = dict(
                        conn.execute(
                            "SELECT doc_id, version FROM documents WHERE ns_id=%s AND doc_id = ANY(%s)", (ns, replaced)
                        ).fetchall()
                    )
                    old = conn.execute(
                        "SELECT c.id, c.doc_id, c.text_hash, v.embedding::text FROM chunks c LEFT JOIN vectors v "
                        "ON v.chunk_rowid = c.id WHERE c.ns_id=%s AND c.doc_id = ANY(%s)",
                        (ns, replaced),
                    ).fetchall()
                    old_vecs = {(doc, h): v for _, doc, h, v in old if v is not None}
                    removed_vecs = [i for i, doc, _, v in old if v is not None and doc not in kept]
                    removed_chunks = [i for i, doc, _, _ in old if doc not in kept]
                    self._delete_chunk_rows(conn, ns, removed_chunks)
                fresh = [d.doc_id for d, _ in todo if d.doc_id not in set(replaced)]
                versions.update(history_sql.last_retired(Qmark(conn), ns, fresh))
                retired = self._retire_for(conn, ns, [d for d, _ in todo], set(replaced) & kept, at)
                n_new = sum(len(d.chunks) for d, _ in todo)
                rowids = [
                    r[0]
                    for r in conn.execute(
                        "SELECT nextval(pg_get_serial_sequence('chunks', 'id')) FROM generate_series(1, %s)", (n_new,)
                    )
                ]
                doc_rows, chunk_rows, post_rows, queue_rows, vec_rows, df, total_len, keys = self._write_rows(
                    ns, todo, rowids, old_vecs, (now, at, versions), res
                )
                if replaced:  # (the retired ones were renamed: this drops the others)
                    conn.execute("DELETE FROM documents WHERE ns_id=%s AND doc_id = ANY(%s)", (ns, replaced))
                self._insert_rows(conn, ns, doc_rows, chunk_rows, post_rows, queue_rows, vec_rows, df, keys)
                conn.execute(
                    "UPDATE namespace_stats SET n_chunks = n_chunks + %s, total_len = total_len + %s WHERE ns_id=%s",
                    (len(chunk_rows), total_len, ns),
                )
                added_chunks = [r[0] for r in chunk_rows] + retired  # a retired chunk: its visibility changed
                removed_chunks += retired
                added_vecs = [r[0] for r in vec_rows]
                if added_vecs or removed_vecs:
                    self._changed(conn, namespace, ns, "vec_version", added_vecs, removed_vecs, res)
                if added_chunks or removed_chunks:
                    self._changed(conn, namespace, ns, "chunk_version", added_chunks, removed_chunks, res)
        except (pgerr.IntegrityError, pgerr.DataError, pgerr.UntranslatableCharacter) as e:
            raise ValidationError(f"write rejected by the store: {str(e).strip()}") from None
        except psycopg.DatabaseError as e:
            if isinstance(e, (psycopg.OperationalError, pgerr.QueryCanceled)):
                raise  # turned into StoreError by _conn
            raise StoreError(f"write to {self.path} failed: {str(e).strip()}") from e
        self._ns_cache.pop(namespace, None)
        self._maybe_analyze(res.chunks_written)
        return res

    @staticmethod
    def _write_rows(
        ns: int,
        todo: Sequence[tuple[PreparedDocument, str]],
        rowids: Sequence[int],
        old_vecs: dict[tuple[str, str], str],
        when: tuple[str, float, dict[str, int]],
        res: WriteResult,
    ) -> tuple[
        list[tuple[Any, ...]],
        list[tuple[Any, ...]],
        list[tuple[Any, ...]],
        list[tuple[Any, ...]],
        list[tuple[Any, ...]],
        Counter[str],
        int,
        set[str],
    ]:
        """The rows one write inserts (documents, chunks, postings, queue, reused vectors), its term
        document frequencies, token count and metadata keys; ``res`` counts chunks and reused vectors."""
        doc_rows, chunk_rows, post_rows, queue_rows, vec_rows = [], [], [], [], []
        df: Counter[str] = Counter()
        total_len = 0
        keys: set[str] = set()
        it = iter(rowids)
        now, at, versions = when
        for d, created in todo:
            meta_json = json.dumps(d.metadata, ensure_ascii=False, allow_nan=False)
            keys.update(d.metadata)
            occurred = d.occurred_at if d.occurred_at is not None else at
            version = versions.get(d.doc_id, 0) + 1
            doc_rows.append(
                (ns, d.doc_id, d.source, meta_json, d.content_hash, len(d.chunks), created, now)
                + (occurred, at, version, d.mem_key, d.reason)
            )
            for i, (text, toks, lang, th) in enumerate(zip(d.chunks, d.tokens, d.langs, d.text_hashes), start=1):
                rid = next(it)
                terms = toks.split()
                tf = Counter(terms)
                chunk_rows.append(
                    (
                        rid,
                        ns,
                        d.chunk_id(i),
                        d.doc_id,
                        i,
                        text,
                        th,
                        lang,
                        d.source,
                        d.context,
                        toks,
                        len(terms),
                        created,
                        now,
                    )
                )
                post_rows += [(ns, t, rid, c, len(terms)) for t, c in tf.items()]
                df.update(tf.keys())
                total_len += len(terms)
                v = old_vecs.get((d.doc_id, th))
                if d.vectors is not None:  # precomputed: stored as given (pgvector's text form), never queued
                    vec_rows.append((rid, ns, "[" + ",".join(map(repr, d.vectors[i - 1].tolist())) + "]"))
                elif v is not None:
                    vec_rows.append((rid, ns, v))
                    res.vectors_reused += 1
                else:
                    queue_rows.append((ns, rid, now))
                res.chunks_written += 1
        return doc_rows, chunk_rows, post_rows, queue_rows, vec_rows, df, total_len, keys

    def _insert_rows(
        self,
        conn: psycopg.Connection,
        ns: int,
        doc_rows: list[tuple[Any, ...]],
        chunk_rows: list[tuple[Any, ...]],
        post_rows: list[tuple[Any, ...]],
        queue_rows: list[tuple[Any, ...]],
        vec_rows: list[tuple[Any, ...]],
        df: Counter[str],
        keys: set[str],
    ) -> None:
        """The rows of one write, in bulk (COPY), and the term and metadata-key statistics."""
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO documents (ns_id, doc_id, source, metadata, content_hash, n_chunks, created_at, updated_at, "
                "occurred_at, recorded_at, version, mem_key, change_reason) "
                "VALUES (%s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                doc_rows,
            )
            self._copy(
                cur,
                "chunks (id, ns_id, chunk_id, doc_id, ord, text, text_hash, lang, source, context, "
                "tokens, n_tokens, created_at, updated_at)",
                chunk_rows,
            )
            self._copy(cur, "postings (ns_id, term, chunk_rowid, tf, dl)", post_rows)
            self._copy(cur, "embed_queue (ns_id, chunk_rowid, enqueued_at)", queue_rows)
            if queue_rows:
                cur.execute(
                    "UPDATE namespace_stats SET n_pending = n_pending + %s WHERE ns_id=%s", (len(queue_rows), ns)
                )
            self._copy(cur, "vectors (chunk_rowid, ns_id, embedding)", vec_rows)
            if df:
                terms_l = list(df)
                cur.execute(
                    "INSERT INTO term_df (ns_id, term, df) SELECT %s, t, n FROM unnest(%s::text[], %s::bigint[]) "
                    "AS u(t, n) ON CONFLICT (ns_id, term) DO UPDATE SET df = term_df.df + excluded.df",
                    (ns, terms_l, [df[t] for t in terms_l]),
                )
            if keys:
                cur.execute(
                    "INSERT INTO metadata_keys SELECT %s, k FROM unnest(%s::text[]) AS k ON CONFLICT DO NOTHING",
                    (ns, sorted(keys)),
                )

    def _maybe_analyze(self, n: int) -> None:
        """Refresh planner statistics after bulk writes (autovacuum catches up only later, and a
        planner that still believes the tables empty picks nested loops over a million rows)."""
        with self._wlock:
            self._since_analyze += n
            if self._since_analyze < max(5_000, self._analyzed_at // 5):
                return
            self._analyzed_at += self._since_analyze
            self._since_analyze = 0
        with self._conn(write=True, record=False) as conn:
            # VACUUM sets the visibility map, without which the covering postings index cannot
            # answer BM25 alone (autovacuum does it too, later)
            conn.execute("VACUUM (ANALYZE) postings")
            for table in ("chunks", "term_df", "vectors", "embed_queue"):
                conn.execute(f"ANALYZE {table}")

    @staticmethod
    def _copy(cur: psycopg.Cursor, target: str, rows: list[tuple[Any, ...]]) -> None:
        if not rows:
            return
        with cur.copy(f"COPY {target} FROM STDIN") as cp:
            for r in rows:
                cp.write_row(r)

    @staticmethod
    def _retire_for(
        conn: psycopg.Connection, ns: int, docs: Sequence[PreparedDocument], keep: set[str], at: float
    ) -> list[int]:
        """Retire, in the write's transaction, the replaced versions kept as history (``keep``) and
        the current holders of the keys the write's documents carry; returns the retired rowids."""
        db = Qmark(conn)
        out: list[int] = []
        for d in docs:
            if d.mem_key:
                holder = history_sql.current_by_key(db, ns, d.mem_key)
                if holder is not None and holder != d.doc_id:
                    r = history_sql.retire(db, ns, holder, at, f"superseded by {d.doc_id} (same key)")
                    out += r[1] if r else []
        for doc_id in sorted(keep):
            r = history_sql.retire(db, ns, doc_id, at, None)
            out += r[1] if r else []
        return out

    @contextmanager
    def _namespace_write(self, namespace: str) -> Iterator[tuple[psycopg.Connection, int | None]]:
        """The write transaction of the shared writes (store/sql/writes.py) and the namespace's id,
        its row locked (one writer per namespace)."""
        with self._wlock, self._conn(write=True) as conn, conn.transaction():
            yield conn, self._lock_ns(conn, namespace, create=False)

    @staticmethod
    def _vector_rowids(conn: psycopg.Connection, ns: int, rowids: list[int]) -> list[int]:
        """Those of ``rowids`` that have a vector."""
        return [
            r[0]
            for r in conn.execute(
                "SELECT chunk_rowid FROM vectors WHERE ns_id=%s AND chunk_rowid = ANY(%s)", (ns, rowids)
            )
        ]

    @staticmethod
    def _drop_emptied_document(conn: psycopg.Connection, ns: int, doc_id: str) -> None:
        """Delete the document ``doc_id`` when it has no chunk left."""
        conn.execute(
            "DELETE FROM documents d WHERE ns_id=%s AND doc_id=%s AND NOT EXISTS "
            "(SELECT 1 FROM chunks c WHERE c.ns_id = d.ns_id AND c.doc_id = d.doc_id)",
            (ns, doc_id),
        )

    @staticmethod
    def _delete_chunk_rows(conn: psycopg.Connection, ns: int, rowids: list[int]) -> None:
        """Delete chunks with their postings, BM25 statistics, vectors, queue entries and graph
        provenance, in the caller's transaction."""
        if not rowids:
            return
        rows = conn.execute(
            "SELECT id, tokens, n_tokens FROM chunks WHERE id = ANY(%s) AND ns_id=%s", (rowids, ns)
        ).fetchall()
        df: Counter[str] = Counter()
        total = 0
        pairs_t: list[str] = []
        pairs_r: list[int] = []
        for rid, toks, n in rows:
            terms = set(toks.split())
            df.update(terms)
            total += n
            pairs_t += terms
            pairs_r += [rid] * len(terms)
        conn.execute(
            "DELETE FROM postings p USING unnest(%s::text[], %s::bigint[]) AS u(t, r) "
            "WHERE p.ns_id=%s AND p.term = u.t AND p.chunk_rowid = u.r",
            (pairs_t, pairs_r, ns),
        )
        if df:
            terms_l = list(df)
            conn.execute(
                "UPDATE term_df d SET df = d.df - u.n FROM unnest(%s::text[], %s::bigint[]) AS u(t, n) "
                "WHERE d.ns_id=%s AND d.term = u.t",
                (terms_l, [df[t] for t in terms_l], ns),
            )
            conn.execute("DELETE FROM term_df WHERE ns_id=%s AND term = ANY(%s) AND df <= 0", (ns, terms_l))
        conn.execute(
            "UPDATE namespace_stats SET n_chunks = n_chunks - %s, total_len = total_len - %s WHERE ns_id=%s",
            (len(rows), total, ns),
        )
        for i in range(0, len(rowids), 500):
            graph_sql.delete_graph_provenance(Qmark(conn), rowids[i : i + 500])
        unqueued = conn.execute(
            "DELETE FROM embed_queue WHERE ns_id=%s AND chunk_rowid = ANY(%s)", (ns, rowids)
        ).rowcount
        if unqueued:
            conn.execute("UPDATE namespace_stats SET n_pending = n_pending - %s WHERE ns_id=%s", (unqueued, ns))
        conn.execute("DELETE FROM chunks WHERE ns_id=%s AND id = ANY(%s)", (ns, rowids))  # vectors cascade

    def reindex_sparse(self) -> int:
        """Rebuild postings and BM25 statistics from chunk text (after a tokenizer change)."""
        with self._conn(write=True) as conn:
            return self._reindex(conn)

    def _reindex(self, conn: psycopg.Connection) -> int:
        from ...text.tokenize import index_tokens

        n = 0
        with self._wlock, conn.transaction():
            for (ns,) in conn.execute("SELECT ns_id FROM namespace_stats ORDER BY ns_id FOR UPDATE").fetchall():
                conn.execute("DELETE FROM postings WHERE ns_id=%s", (ns,))
                conn.execute("DELETE FROM term_df WHERE ns_id=%s", (ns,))
                rows = conn.execute("SELECT id, text, lang, context FROM chunks WHERE ns_id=%s", (ns,)).fetchall()
                df: Counter[str]
                post, upd, df, total = [], [], Counter(), 0
                for rid, text, lang, ctx in rows:
                    terms = index_tokens(text, lang, ctx)
                    tf = Counter(terms)
                    upd.append((" ".join(terms), len(terms), rid))
                    post += [(ns, t, rid, c, len(terms)) for t, c in tf.items()]
                    df.update(tf.keys())
                    total += len(terms)
                with conn.cursor() as cur:
                    cur.executemany("UPDATE chunks SET tokens=%s, n_tokens=%s WHERE id=%s", upd)
                    self._copy(cur, "postings (ns_id, term, chunk_rowid, tf, dl)", post)
                    self._copy(cur, "term_df (ns_id, term, df)", [(ns, t, c) for t, c in df.items()])
                conn.execute(
                    "UPDATE namespace_stats SET n_chunks=%s, total_len=%s WHERE ns_id=%s", (len(rows), total, ns)
                )
                self._bump(conn, ns, "chunk_version")
                n += len(rows)
        return n
