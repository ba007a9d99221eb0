"""The scale-out store: PostgreSQL + pgvector behind the same protocol as :mod:`.sqlite`.

    Memory("postgresql://user@host/db")          # or --db postgresql://… on every command

Everything lives in one PostgreSQL schema (``hybridmem`` by default, so its tables never collide
with an application's), created and upgraded by numbered migrations under an advisory lock.

* **BM25 in SQL**, from hybridmem's own tokenizer: ``postings(ns_id, term, chunk_rowid, tf, dl)``,
  per-namespace document frequencies (``term_df``), chunk count and total length, all maintained in
  the write transaction. The score is the formula of :mod:`hybridmem.retrieve.sparse` (FTS5's)::

      idf(t) = ln((N - n_t + 0.5) / (n_t + 0.5)), floored at 1e-6
      score(d) = Σ_t idf(t) · tf·(k1 + 1) / (tf + k1·(1 - b + b·|d| / avgdl)),  k1 = 1.2, b = 0.75

  PostgreSQL's ``ts_rank`` is not BM25 and its parser splits ``HEL-4040``: it is not used.
* **Dense** vectors in ``vector(d)`` with an HNSW index (cosine); filtered queries use pgvector's
  iterative index scans (0.8+) and fall back to an exact scan when the index returns fewer than
  ``k`` rows while more rows pass the filter.
* **Filters** compile to parameterized SQL over JSONB (:func:`~hybridmem.store.sql.filters.to_pg_sql`);
  equalities are also emitted as containment (``@>``), which the GIN index on ``documents.metadata``
  answers, so a selective filter does not scan every document's JSON. Metadata is stored once per
  document; a chunk reaches it through its document's primary key.
* **Connections** come from a psycopg 3 pool; every statement runs under a statement timeout.
  Writers of one namespace are serialized by a row lock on the namespace, so several processes may
  write to one database.

The dense leg runs in the server (pgvector). The BM25 leg runs, by default (``bm25_leg="process"``),
over postings each process loads from the stored tokens and keeps in step with every process's
writes by replaying the change log (``changelog_sql``): a query reads no posting from the database.
With ``bm25_leg="sql"`` it is aggregated in the server per query (``search_sparse``) and a
``Memory`` over this store keeps no in-process index at all.

The parts: ``store`` (the class, connecting), ``core`` (the pool, transactions, meta, namespaces and
their counters), ``migrations`` (the schema), ``schema`` (constants and helpers the parts share),
``qmark`` (the ``?`` dialect of the shared SQL), ``writes``, ``vectors`` (the embedder's column and
index, the queue, vectors in and out), ``wire`` (pgvector's binary COPY format), ``reads``,
``search`` (BM25 and dense search in SQL, filters), ``files`` (``integrity_check``).
"""

from .core import mask_url
from .migrations import MIGRATIONS, SCHEMA_VERSION
from .schema import HNSW_EF_CONSTRUCTION, HNSW_M
from .store import BM25_LEG_ENV, BM25_SNAPSHOT_DIR_ENV, PostgresStore

__all__ = [
    "PostgresStore",
    "mask_url",
    "SCHEMA_VERSION",
    "MIGRATIONS",
    "HNSW_M",
    "HNSW_EF_CONSTRUCTION",
    "BM25_LEG_ENV",
    "BM25_SNAPSHOT_DIR_ENV",
]
