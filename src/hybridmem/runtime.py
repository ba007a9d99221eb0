"""What an adapter (the CLI, a server) settles before it opens a ``Memory``: the store target it was
given (a file path or a PostgreSQL URL: may a store be there, how to show it, which embedder built
it) and the process's numpy BLAS threads.

The functions are the store's and the dense leg's own (``hybridmem.store``,
``hybridmem.retrieve.blas``); the adapters may not import those layers (pyproject.toml's
import-linter contracts), so this is their public place.
"""

from __future__ import annotations

from pathlib import Path

from .embed.registry import spec_for_name
from .errors import NotFoundError
from .retrieve.blas import limit_process_blas
from .store import display_target, is_url, open_store, store_exists

__all__ = ["display_target", "is_url", "limit_process_blas", "store_exists", "stored_embedder"]


def stored_embedder(target: str | Path) -> str | None:
    """The embedder spec a store was built with, without loading a model (None: no store yet)."""
    if not store_exists(target):
        return None
    try:
        store = open_store(target, create=False)
    except NotFoundError:
        return None
    try:
        name, _ = store.embedder_info()
    finally:
        store.close()
    return spec_for_name(name) if name else None
