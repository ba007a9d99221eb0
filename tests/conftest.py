"""Shared fixtures: a fresh hash-embedder Memory per test, and the path of the shared data.

The tests stand by layer (store/, retrieve/, text/, core/, server/, cli/, agent_memory/, llm/,
embed/, graph/, eval/, integrations/, faults/); the helpers they share (pg_utils, server_utils,
llm_fakes, corpora, ...) stand here. Every layer's folder is on ``sys.path``, so a test may import
another layer's test module by name (its strategies, corpora) whatever order pytest collects in."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hybridmem import Memory

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path[1:1] = [str(d) for d in sorted(Path(__file__).parent.iterdir()) if d.is_dir() and d.name[0] not in "._"]
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


@pytest.fixture
def token_reads() -> Callable[[Memory], list[list[int]]]:
    """``watch(m)``: from then on, the rowids of every ``tokens_for`` read of ``m``'s store (what the
    feedback and substance legs read), in a list it returns."""

    def watch(m: Memory) -> list[list[int]]:
        seen: list[list[int]] = []
        real = m.store.tokens_for

        def spy(namespace, rowids):  # type: ignore[no-untyped-def]
            seen.append(list(rowids))
            return real(namespace, rowids)

        m.store.tokens_for = spy  # type: ignore[method-assign]
        return seen

    return watch


@pytest.fixture(scope="session")
def scifact_bm25(tmp_path_factory: pytest.TempPathFactory):
    """SciFact's test split (as ``hybridmem eval`` loads it) and a BM25-searchable Memory over its
    5,183 abstracts, indexed whole: built once per session, shared by the BM25 and metrics oracles."""
    from hybridmem.eval.datasets import load_dataset

    ds = load_dataset(str(shared_path("data", "beir", "scifact")), "test")
    m = Memory(tmp_path_factory.mktemp("scifact") / "sf.db", embedder="hash", chunk_size=None, auto_embed=False)
    report = m.add_documents(ds.docs, batch_size=512)
    try:
        yield ds, m, report
    finally:
        m.close()


# ---------------------------------------------------------------- PostgreSQL (tests/pg_utils.py)
@pytest.fixture
def pg_url() -> Iterator[str]:
    """The URL of a fresh, empty database on the session's PostgreSQL (pgvector available)."""
    from pg_utils import server

    srv = server()
    url = srv.new_database()
    try:
        yield url
    finally:
        srv.drop_database(url)


BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str | Path:
    """Where a store lives, once per backend: an SQLite file path, then the URL of a fresh
    PostgreSQL database (the contract suite: tests taking it run on both backends)."""
    return tmp_path / "m.db" if request.param == "sqlite" else request.getfixturevalue("pg_url")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    import sys

    if "pg_utils" in sys.modules:
        sys.modules["pg_utils"].stop_server()
