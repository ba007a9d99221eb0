"""The embedded store: one SQLite file, WAL, numbered migrations, FTS5 BM25 per namespace.

Every write (chunks, BM25 postings, vectors, embedding queue) happens in one transaction, so a crash
leaves either the old or the new state. Namespaces get their own FTS5 table: BM25 statistics and
postings of one tenant never mix with another's.

The parts: ``store`` (the class, opening a file), ``core`` (connections, transactions, meta,
namespaces), ``migrations`` (the schema), ``schema`` (tables and helpers the parts share),
``writes``, ``reads``, ``search`` (BM25 by FTS5, filters), ``files`` (open checks, ``check``,
``backup``); the reads both SQL stores share are in ``store/sql/common.py``.
"""

from .migrations import MIGRATIONS, SCHEMA_VERSION
from .search import _FTS_TOKENIZE, _fts, _fts_query
from .store import SQLiteStore

__all__ = ["SQLiteStore", "SCHEMA_VERSION", "MIGRATIONS", "_FTS_TOKENIZE", "_fts", "_fts_query"]
