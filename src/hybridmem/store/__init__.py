"""Storage backends behind one protocol: an SQLite file (embedded default) or a PostgreSQL URL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .base import ChunkRow, PreparedDocument, Store, WriteResult
from .sqlite import SQLiteStore

__all__ = [
    "Store",
    "SQLiteStore",
    "ChunkRow",
    "PreparedDocument",
    "WriteResult",
    "open_store",
    "is_url",
    "store_exists",
    "display_target",
]

_PG_SCHEMES = ("postgresql://", "postgres://")


def is_url(target: str | Path) -> bool:
    """True for a PostgreSQL URL (``postgresql://…`` or ``postgres://…``), False for a file path."""
    return isinstance(target, str) and target.lower().startswith(_PG_SCHEMES)


def display_target(target: str | Path) -> str:
    """The store target for messages: a URL with its password masked, or the path."""
    if is_url(target):
        from .postgres import mask_url

        return mask_url(str(target))
    return str(target)


def open_store(target: str | Path, *, create: bool = True, **options: Any) -> Store:
    """The backend for ``target``: :class:`~hybridmem.store.postgres.PostgresStore` for a PostgreSQL
    URL (needs the ``postgres`` extra; ``options`` go to it), :class:`SQLiteStore` for anything else
    (a file path). Of the options, an SQLite store takes ``read_only`` (open it for reads only, as
    it does by itself when the file or its directory is not writable) and ``verify`` (False: no
    ``quick_check`` at open, for ``hybridmem check``); the others tune server-side search."""
    read_only = bool(options.pop("read_only", False))
    verify = bool(options.pop("verify", True))
    if is_url(target):
        if read_only:
            from ..errors import ValidationError

            raise ValidationError(
                "read_only applies to SQLite stores; for PostgreSQL, connect as a role that may only read",
                field="read_only",
            )
        try:
            from .postgres import PostgresStore
        except ModuleNotFoundError as e:  # psycopg missing
            from ..errors import StoreError

            raise StoreError(
                f"a PostgreSQL store needs the postgres extra: pip install 'hybridmem[postgres]' (missing {e.name})"
            ) from None
        return PostgresStore(str(target), create=create, **options)
    return SQLiteStore(target, create=create, read_only=read_only, verify=verify)


def store_exists(target: str | Path) -> bool:
    """Whether a store may already be there: a file that exists, or any URL (the server decides)."""
    return is_url(target) or Path(target).exists()
