"""Export from and import into a store named by its path or URL (the CLI's ``export``/``import``:
no model loads, the store is opened as data). A file written by ``export_to`` appears whole or
not at all (written beside, then renamed); a ``.gz`` name is compressed."""

from __future__ import annotations

import gzip
import io
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, cast

from ..store import display_target, open_store
from ..store.base import Store
from .dump import ExportReport, write_export
from .load import ImportReport, import_file

__all__ = ["export_store", "export_to", "import_into"]


def export_store(
    store: Store,
    dest: str | Path | IO[str] | None,
    namespaces: Sequence[str] | None = None,
    *,
    vectors: bool = False,
    graph: bool = False,
    source: str = "",
) -> ExportReport:
    """Export ``store`` to ``dest``: a path (``-`` or None: standard output) or an open text file."""
    if dest is None or dest == "-":
        return write_export(store, sys.stdout, namespaces, vectors=vectors, graph=graph, source=source)
    if not isinstance(dest, (str, Path)):
        return write_export(store, dest, namespaces, vectors=vectors, graph=graph, source=source)
    path = Path(dest)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "wb") as raw:
            sink = cast("IO[bytes]", gzip.GzipFile(fileobj=raw, mode="wb") if path.suffix == ".gz" else raw)
            text = io.TextIOWrapper(sink, encoding="utf-8", newline="\n")
            rep = write_export(store, text, namespaces, vectors=vectors, graph=graph, source=source)
            text.flush()
            text.detach()  # the raw file stays open for its fsync
            if sink is not raw:
                sink.close()  # the gzip trailer
            raw.flush()
            os.fsync(raw.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as any file this user writes (mkstemp's is private)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return rep


def export_to(
    target: str,
    dest: str | Path | None,
    namespaces: Sequence[str] | None = None,
    *,
    vectors: bool = False,
    graph: bool = False,
) -> ExportReport:
    """Export the store at ``target`` (an SQLite path or a PostgreSQL URL); see :func:`export_store`."""
    store = open_store(target, create=False)
    try:
        return export_store(store, dest, namespaces, vectors=vectors, graph=graph, source=display_target(target))
    finally:
        store.close()


def import_into(
    path: str | Path,
    target: str,
    *,
    reembed: bool = False,
    on_conflict: str = "error",
    progress: Callable[[str, int], None] | None = None,
) -> ImportReport:
    """Import the export file ``path`` into the store at ``target`` (made when it does not exist)."""
    store = open_store(target, create=True)
    try:
        return import_file(path, store, reembed=reembed, on_conflict=on_conflict, progress=progress)
    finally:
        store.close()
