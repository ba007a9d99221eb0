"""The store's change log of chunks (issue 18): every committed chunk-version bump records, in its
transaction, the rowids it added and removed; a process whose in-process BM25 postings (or cached
filter results, or saved snapshot) are behind replays the changes instead of reloading every
chunk's tokens — another process writing the same SQLite file, several servers on one PostgreSQL
database (``bm25_leg="process"``, the default there). A gap the log does not cover (pruned, a
re-index) reloads from the store, never answers from a partial replay."""

from __future__ import annotations

import logging
import random
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hybridmem import Memory
from hybridmem.retrieve import sparse_file
from hybridmem.retrieve.legs import ProcessBM25Legs
from hybridmem.retrieve.sparse import SparseIndex
from hybridmem.store.sql import changelog as changelog_sql
from hybridmem.text.tokenize import query_tokens
from old_layouts import tokens_back_to_fts

NS = "default"
_R = random.Random(7)
WORDS = ["".join(_R.choices("abcdefghijklmnopqrstuvwxyz", k=5)) for _ in range(400)]
QUERIES = [" ".join(_R.choices(WORDS[:120], k=3)) for _ in range(25)] + ["T-3 ticket", "T-77"]


def _docs(rng: random.Random, n: int, start: int = 0, team: str = "a") -> list[dict[str, Any]]:
    return [
        {
            "id": f"d{start + i}",
            "text": " ".join(rng.choices(WORDS, k=rng.randint(4, 25))) + f" ticket T-{start + i}",
            "metadata": {"team": team},
        }
        for i in range(n)
    ]


def _open(target: str | Path, **kw: Any) -> Memory:
    return Memory(target, embedder="hash", auto_embed=False, **kw)


def _bm25(m: Memory, flt: dict[str, Any] | None = None) -> dict[str, list[tuple[str, float]]]:
    kw = {"metadata_filter": flt} if flt else {}
    return {q: [(r.chunk_id, r.rrf_score) for r in m.search(q, mode="bm25", top_k=10, **kw).results] for q in QUERIES}


def _fresh(m: Memory) -> SparseIndex:
    """The namespace's postings read from the store now (the reference), not counted as a load."""
    idx = SparseIndex()
    idx.load(*type(m.store).load_tokens(m.store, NS))
    return idx


class _Loads:
    """Counts full loads of the postings from the store (the change log should make them rare)."""

    def __init__(self, m: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
        self.n = 0
        real = m.store.load_tokens

        def counted(ns: str):  # type: ignore[no-untyped-def]
            self.n += 1
            return real(ns)

        monkeypatch.setattr(m.store, "load_tokens", counted)


def _mixed_writes(w: Memory, rng: random.Random, start: int) -> None:
    w.add_documents(_docs(rng, 30, start=start))  # new
    w.add_documents(_docs(rng, 10, start=3))  # replaces d3..d12
    w.delete("d15")
    w.add_documents(_docs(rng, 5, start=start + 30, team="b"))
    w.add("Caroline moved to Lisbon", id="city", key="user.city")
    w.add("Caroline moved to Porto", id="city2", key="user.city")  # supersedes: a retired version


# ---------------------------------------------------------------- the log itself, both backends
def test_every_chunk_change_is_logged_with_its_version(target: str | Path) -> None:
    with _open(target) as m:
        rng = random.Random(1)
        m.add_documents(_docs(rng, 20))
        v0 = m.store.chunk_version(NS)
        res = [m.store.write_documents(NS, [])]  # an empty write bumps nothing
        assert m.store.chunk_version(NS) == v0 and not res[0].chunk_changes
        _mixed_writes(m, rng, 100)
        v1 = m.store.chunk_version(NS)
        got = m.store.chunk_changes_since(NS, v0)
        assert got is not None and [c[0] for c in got] == list(range(v0 + 1, v1 + 1))
        assert all(c[1].dtype == np.int64 and c[2].dtype == np.int64 for c in got)
        assert m.store.chunk_changes_since(NS, v1) == []
        assert m.store.chunk_changes_since(NS, v1 + 1) is None  # a version the store never reached
        assert m.store.chunk_changes_since(NS, -1) is None
        assert m.store.chunk_changes_since("nowhere", 0) is None
        # a deleted chunk is logged as removed, a new one as added, a retired one as both
        deleted = [c for c in got if len(c[1]) == 0]
        assert len(deleted) == 1 and len(deleted[0][2]) == 1
        new = [c for c in got if len(c[2]) == 0]
        assert [len(c[1]) for c in new] == [30, 5, 1]  # the two batches and the first keyed memory
        superseded = got[-1]  # the second keyed memory: its chunk added, the first one retired
        assert len(superseded[1]) == 2 and len(superseded[2]) == 1 and superseded[2][0] in superseded[1]


def test_the_log_keeps_its_last_versions_and_a_pruned_gap_answers_none(
    target: str | Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(changelog_sql, "KEEP", 3)
    with _open(target) as m:
        for i in range(8):
            m.add(f"note {i} about {WORDS[i]}", id=f"n{i}")
        v = m.store.chunk_version(NS)
        assert v == 8
        assert m.store.chunk_changes_since(NS, v - 3) is not None
        assert m.store.chunk_changes_since(NS, v - 4) is None  # pruned: a reader reloads


def test_a_reindex_leaves_a_gap_and_readers_reload(tmp_path: Path) -> None:
    with _open(tmp_path / "m.db") as m:
        m.add_documents(_docs(random.Random(2), 30))
        v = m.store.chunk_version(NS)
        m.store.reindex_sparse()  # rewrites every chunk's tokens: not a change the log can replay
        assert m.store.chunk_changes_since(NS, v) is None


# ---------------------------------------------------------------- two processes, one store
@pytest.mark.parametrize("flt", [None, {"team": "b"}])
def test_a_reader_replays_another_writers_changes_instead_of_reloading(
    target: str | Path, monkeypatch: pytest.MonkeyPatch, flt: dict[str, Any] | None
) -> None:
    """Two Memory objects on one store are two processes as far as their indexes go: the writer's
    changes reach the reader only through the store."""
    rng = random.Random(3)
    with _open(target) as w, _open(target) as r:
        w.add_documents(_docs(rng, 80))
        loads = _Loads(r, monkeypatch)
        _bm25(r, flt)  # the reader loads once (and caches the filter's rowids)
        assert loads.n == 1
        for start in (200, 300, 400):
            _mixed_writes(w, rng, start)
            assert _bm25(r, flt) == _bm25(w, flt)  # the writer applied its own writes in process
            idx = r.legs.sparse_index(NS) if not isinstance(r.legs, ProcessBM25Legs) else r.legs.local.sparse_index(NS)
            fresh = _fresh(r)
            assert len(idx) == len(fresh)
            for q in QUERIES:
                assert idx.search(query_tokens(q), 30) == fresh.search(query_tokens(q), 30)
        assert loads.n == 1  # every change replayed from the log, none reloaded
        # and the reader's own writes still apply in process after others' were replayed
        r.add("a quokka report", id="mine")
        w.add("a wombat report", id="theirs")
        assert r.search("quokka", mode="bm25").results[0].chunk_id.startswith("mine_")
        assert r.search("wombat", mode="bm25").results[0].chunk_id.startswith("theirs_")
        assert loads.n == 1


def test_a_gap_past_the_log_reloads_and_answers_exactly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "m.db"
    rng = random.Random(4)
    with _open(db) as w, _open(db) as r:
        w.add_documents(_docs(rng, 40))
        loads = _Loads(r, monkeypatch)
        _bm25(r)
        monkeypatch.setattr(changelog_sql, "KEEP", 2)
        for i in range(5):
            w.add(f"entry {i} {WORDS[i]} {WORDS[i + 1]}", id=f"e{i}")
        assert _bm25(r) == _bm25(w)
        assert loads.n == 2  # the log no longer reached the reader's version: one full load


def test_a_write_from_another_os_process_is_replayed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "m.db"
    with _open(db) as m:
        m.add_documents(_docs(random.Random(5), 60))
        loads = _Loads(m, monkeypatch)
        _bm25(m)
        script = textwrap.dedent(
            f"""
            from hybridmem import Memory
            with Memory({str(db)!r}, embedder="hash", auto_embed=False) as w:
                w.add("the capybara escalation runbook", id="capy")
                w.delete("d1")
                w.add_documents([{{"id": "d2", "text": "d2 rewritten about capybara pools"}}])
            """
        )
        subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
        top = [r.chunk_id for r in m.search("capybara", mode="bm25").results]
        assert top[:2] == ["capy_p1", "d2_p1"] or set(top[:2]) == {"capy_p1", "d2_p1"}
        assert not any(c.startswith("d1_") for c in (r.chunk_id for r in m.search("ticket T-1", mode="bm25").results))
        assert loads.n == 1


# ---------------------------------------------------------------- a saved snapshot brought forward
def _snapshot_then(db: Path, rng: random.Random, monkeypatch: pytest.MonkeyPatch, write: Any) -> None:
    """A store whose postings were saved at close, then ``write(memory)`` by a process that saves
    nothing; snapshots are taken from 50 chunks afterwards."""
    monkeypatch.setattr(sparse_file, "SNAPSHOT_MIN", 50)
    with _open(db) as m:
        m.add_documents(_docs(rng, 200))
        _bm25(m)
        m.add("one more", id="x")  # closing saves at this version
    monkeypatch.setattr(sparse_file, "SNAPSHOT_MIN", 10**9)  # a writer that saves nothing
    with _open(db) as w:
        write(w)
    monkeypatch.setattr(sparse_file, "SNAPSHOT_MIN", 50)


def test_an_older_snapshot_is_brought_forward_through_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "m.db"
    rng = random.Random(6)
    want: dict[str, list[tuple[str, float]]] = {}
    _snapshot_then(db, rng, monkeypatch, lambda w: (_mixed_writes(w, rng, 500), want.update(_bm25(w))))
    r = _open(db)
    try:
        loads = _Loads(r, monkeypatch)
        with caplog.at_level(logging.INFO, logger="hybridmem.retrieve.sparse_file"):
            assert _bm25(r) == want
        assert loads.n == 0 and "brought forward" in caplog.text
        idx, fresh = r.legs.sparse_index(NS), _fresh(r)
        assert len(idx) == len(fresh)
        for q in QUERIES:
            assert idx.search(query_tokens(q), 50) == fresh.search(query_tokens(q), 50)
    finally:
        r.close()


def test_an_older_snapshot_past_the_log_is_refused(tmp_path: Path, monkeypatch, caplog) -> None:
    db = tmp_path / "m.db"
    _snapshot_then(db, random.Random(8), monkeypatch, lambda w: w.add("written after the snapshot: quokka", id="late"))
    with sqlite3.connect(db) as c:  # the log pruned past the snapshot's version
        c.execute("DELETE FROM chunk_log")
    monkeypatch.setattr(sparse_file, "SNAPSHOT_MIN", 50)
    with caplog.at_level(logging.WARNING, logger="hybridmem.retrieve.sparse_file"), _open(db) as r:
        assert r.search("quokka", mode="bm25").results[0].chunk_id.startswith("late_")
    assert "no longer holds every change" in caplog.text


# ---------------------------------------------------------------- PostgreSQL: BM25 in process or in SQL
@pytest.mark.postgres
def test_postgres_bm25_in_process_ranks_as_in_sql(pg_url: str) -> None:
    rng = random.Random(9)
    with _open(pg_url) as proc, _open(pg_url, store_options={"bm25_leg": "sql"}) as sql:
        assert isinstance(proc.legs, ProcessBM25Legs) and not isinstance(sql.legs, ProcessBM25Legs)
        proc.add_documents(_docs(rng, 150) + _docs(rng, 20, start=1000, team="b"))
        for flt in (None, {"team": "b"}):
            a, b = _bm25(proc, flt), _bm25(sql, flt)
            for q in QUERIES:
                assert [c for c, _ in a[q]] == [c for c, _ in b[q]], q
                assert np.allclose([s for _, s in a[q]], [s for _, s in b[q]], atol=1e-6)
                # the leg's raw BM25 scores too
                kw = {"metadata_filter": flt} if flt else {}
                ra = proc.search(q, mode="bm25", top_k=5, **kw).results
                rb = sql.search(q, mode="bm25", top_k=5, **kw).results
                assert np.allclose([x.scores["bm25"] for x in ra], [x.scores["bm25"] for x in rb], atol=1e-6)


@pytest.mark.postgres
def test_postgres_bm25_leg_setting_is_validated(pg_url: str) -> None:
    from hybridmem.errors import ValidationError
    from hybridmem.store.postgres import PostgresStore

    with pytest.raises(ValidationError, match="bm25_leg"):
        PostgresStore(pg_url, bm25_leg="elastic")
    monkey = pytest.MonkeyPatch()
    try:  # the environment sets it for the CLI and `hybridmem serve`
        monkey.setenv("HYBRIDMEM_PG_BM25_LEG", "sql")
        with _open(pg_url) as m:
            assert m.store.bm25_leg == "sql" and not isinstance(m.legs, ProcessBM25Legs)
        monkey.setenv("HYBRIDMEM_PG_BM25_LEG", "elsewhere")
        with pytest.raises(ValidationError, match="HYBRIDMEM_PG_BM25_LEG"):
            PostgresStore(pg_url)
    finally:
        monkey.undo()


def test_a_store_from_before_the_log_migrates_and_logs_from_then_on(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    with _open(db) as m:
        m.add_documents(_docs(random.Random(10), 20))
    with sqlite3.connect(db) as c:  # schema 5: no change logs
        tokens_back_to_fts(c)
        c.execute("DROP TABLE chunk_log")
        c.execute("DROP TABLE vec_log")
        c.execute("PRAGMA user_version=5")
    with _open(db) as m:
        from hybridmem.store import sqlite as sq

        assert m.stats().schema_version == sq.SCHEMA_VERSION
        v = m.store.chunk_version(NS)
        assert m.store.chunk_changes_since(NS, v - 1) is None  # written before the log existed
        m.add("after the migration", id="new")
        got = m.store.chunk_changes_since(NS, v)
        assert got is not None and [c[0] for c in got] == [v + 1] and len(got[0][1]) == 1
        vv = m.store.vector_version(NS)
        m.embed_pending()
        assert sum(len(c[1]) for c in m.store.vector_changes_since(NS, vv) or []) == 21  # the 20 and the new one


# ---------------------------------------------------------------- vectors
def test_every_vector_change_is_logged(target: str | Path) -> None:
    with _open(target) as m:
        m.add_documents(_docs(random.Random(11), 12))
        v0 = m.store.vector_version(NS)
        assert m.embed_pending() == 12
        m.add_documents(_docs(random.Random(12), 3, start=2))  # replaced: their vectors go
        m.embed_pending()
        m.delete("d9")
        v1 = m.store.vector_version(NS)
        got = m.store.vector_changes_since(NS, v0)
        assert got is not None and [c[0] for c in got] == list(range(v0 + 1, v1 + 1))
        assert sum(len(c[1]) for c in got) == 12 + 3
        assert m.store.vector_changes_since(NS, v1) == [] and m.store.vector_changes_since(NS, v1 + 1) is None


def test_a_reader_applies_another_processs_vectors_instead_of_reloading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "m.db"
    rng = random.Random(13)
    with _open(db) as w, _open(db) as r:
        w.add_documents(_docs(rng, 60))
        w.embed_pending()
        loads = [0]
        real = r.store.load_vectors

        def counted(ns: str, alloc=None):  # type: ignore[no-untyped-def]
            loads[0] += 1
            return real(ns, alloc)

        monkeypatch.setattr(r.store, "load_vectors", counted)

        def dense(m: Memory) -> list[list[tuple[str, float]]]:
            return [[(x.chunk_id, x.rrf_score) for x in m.search(q, mode="vector", top_k=8).results] for q in QUERIES]

        assert dense(r) == dense(w) and loads[0] == 1
        for start in (100, 200):
            w.add_documents(_docs(rng, 20, start=start) + _docs(rng, 5, start=10))  # new and replaced
            w.embed_pending()
            w.delete("d30")
            assert dense(r) == dense(w)
        idx = r.legs.dense_index(NS)
        _, rowids, matrix = real(NS)
        assert len(idx) == len(rowids) and loads[0] == 1  # every change applied from the log
        assert r.store.embedder_info()[1] == idx.dim


@pytest.mark.postgres
def test_postgres_processes_share_saved_postings_brought_forward_through_the_log(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """With ``bm25_snapshot_dir`` a server process saves its postings at close; the next one reads
    them back instead of every chunk's tokens, bringing them forward through the change log over
    what other servers wrote meanwhile."""
    monkeypatch.setattr(sparse_file, "SNAPSHOT_MIN", 50)
    opts = {"store_options": {"bm25_snapshot_dir": str(tmp_path / "bm25")}}
    rng = random.Random(14)
    with _open(pg_url, **opts) as a:
        a.add_documents(_docs(rng, 200))
        _bm25(a)
        a.add("one more", id="x")  # closing saves
    assert len(list((tmp_path / "bm25").glob("*.postings"))) == 1
    with _open(pg_url) as other:  # another server, no snapshots
        _mixed_writes(other, rng, 700)
        want = _bm25(other)
    b = _open(pg_url, **opts)
    try:
        loads = _Loads(b, monkeypatch)
        with caplog.at_level(logging.INFO, logger="hybridmem.retrieve.sparse_file"):
            assert _bm25(b) == want
        assert loads.n == 0 and "brought forward" in caplog.text
    finally:
        b.close()
    # another database saving to the same directory gets a file of its own
    from pg_utils import server

    srv = server()
    url2 = srv.new_database()
    try:
        with _open(url2, **opts) as c:
            c.add_documents(_docs(random.Random(15), 120))
            _bm25(c)
            c.add("one more", id="x")
        assert len(list((tmp_path / "bm25").glob("*.postings"))) == 2
        with _open(url2, **opts) as c, _open(url2) as from_store:
            assert _bm25(c) == _bm25(from_store)
            assert c.legs.local.sparse_index(NS).version == c.store.chunk_version(NS)
    finally:
        srv.drop_database(url2)


@pytest.mark.postgres
def test_one_shot_cli_commands_run_bm25_in_sql_and_servers_in_process(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A one-shot command would load every posting of the namespace to answer one query (26 s at 1M
    chunks, against ~0.5 s in SQL); a server loads them once for all its queries."""
    from hybridmem.cli.common import CliContext

    monkeypatch.delenv("HYBRIDMEM_PG_BM25_LEG", raising=False)
    cli = CliContext(db=pg_url, embedder="hash")
    with cli.open_memory() as m:
        assert m.store.bm25_leg == "sql" and not isinstance(m.legs, ProcessBM25Legs)
    with cli.open_memory(long_running=True) as m:
        assert m.store.bm25_leg == "process" and isinstance(m.legs, ProcessBM25Legs)
    monkeypatch.setenv("HYBRIDMEM_PG_BM25_LEG", "process")  # the user's choice wins
    with cli.open_memory() as m:
        assert m.store.bm25_leg == "process"
