"""Storage backends behind one protocol."""

from .base import ChunkRow, PreparedDocument, Store, WriteResult
from .sqlite import SQLiteStore

__all__ = ["Store", "SQLiteStore", "ChunkRow", "PreparedDocument", "WriteResult"]
