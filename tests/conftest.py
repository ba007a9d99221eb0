"""Shared fixtures: a fresh hash-embedder Memory per test, and the path of the shared data."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hybridmem import Memory

REPO_ROOT = Path(__file__).resolve().parent.parent
#: third-party evaluation data and the query contract, next to the project (read-only)
SHARED = REPO_ROOT.parent / "shared"


def shared_path(*parts: str) -> Path:
    """A path under ``SHARED``; skips the calling test when it is missing."""
    p = SHARED.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"shared data missing: {p}")
    return p


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    m = Memory(tmp_path / "m.db", embedder="hash", auto_embed=False)
    try:
        yield m
    finally:
        m.close()
