"""What the indexes saved beside a store (``hnsw_file``, ``sparse_file``) share: a directory sync
after a rename, and the sweep of temporary files that killed saves left."""

from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = ["fsync_dir", "sweep_tmp"]


def fsync_dir(d: Path) -> None:
    """Make a rename inside ``d`` durable."""
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sweep_tmp(directory: Path, stem: str, older_than: float = 3600.0) -> None:
    """Delete ``<stem>.*.tmp`` files in ``directory`` over ``older_than`` seconds old (what saves
    killed mid-way left; a younger one may be another process's save in progress)."""
    old = time.time() - older_than
    for f in directory.glob(f"{stem}.*.tmp"):
        try:
            if f.stat().st_mtime < old:
                f.unlink()
        except OSError:
            pass
