"""Store files (issue 16, Files): a damaged file is refused at open with a clear error on every
command, ``hybridmem check`` lists every problem, a 0-byte file is no store unless told to create,
a read-only store serves reads (and refuses writes saying why), ``hybridmem backup`` copies a store
in use. The CLI runs in a subprocess, as a user runs it: clear errors, never a traceback."""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hybridmem import Memory
from hybridmem.errors import NotFoundError, StoreError

#: as root, chmod does not stop writes: the CLI then runs with the capabilities that bypass file
#: permissions dropped (setpriv), so the permission bits apply to it as to any user
_SETPRIV = shutil.which("setpriv")
_DROP_CAPS = [_SETPRIV or "setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner"]


def run(
    db: Path | str, *args: str, stdin: str | None = None, prefix: list[str] | None = None
) -> subprocess.CompletedProcess:
    cmd = [*(prefix or []), sys.executable, "-m", "hybridmem.cli", "--db", str(db), "--embedder", "hash", *args]
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=120, env=env)


def build(path: Path, n: int = 400) -> Path:
    """A store of ``n`` one-chunk documents with their vectors (about 1 MB for 400)."""
    rng = random.Random(16)
    words = [f"term{i}" for i in range(3000)]
    with Memory(path, embedder="hash", auto_embed=False, chunk_size=None) as mem:
        mem.add_documents(
            [{"id": f"d{i}", "text": " ".join(rng.choices(words, k=80)), "metadata": {"k": i % 5}} for i in range(n)]
        )
        mem.wait_for_vectors()
    return path


def damage(path: Path, size: int = 64 * 1024) -> None:
    """``size`` random bytes over the middle of the file (seeded), as a bad disk or copy would."""
    rng = random.Random(64)
    with open(path, "r+b") as f:
        f.seek(path.stat().st_size // 2)
        f.write(bytes(rng.randrange(256) for _ in range(size)))


def damage_table(path: Path, table: str) -> None:
    """Random bytes over the first page of ``table`` and of each of its indexes."""
    db = sqlite3.connect(path)
    page_size = db.execute("PRAGMA page_size").fetchone()[0]
    roots = [r[0] for r in db.execute("SELECT rootpage FROM sqlite_master WHERE tbl_name=? AND rootpage", (table,))]
    db.close()
    rng = random.Random(7)
    with open(path, "r+b") as f:
        for root in roots:
            f.seek((root - 1) * page_size)
            f.write(bytes(rng.randrange(256) for _ in range(page_size)))


def no_traceback(r: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout, r.stderr


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return build(tmp_path / "m.db")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---------------------------------------------------------------- damaged files
def test_a_damaged_store_is_refused_at_open_by_every_command(store: Path, tmp_path: Path) -> None:
    damage(store)
    with pytest.raises(StoreError, match="is damaged") as ei:
        Memory(store, embedder="hash", auto_embed=False)
    assert "hybridmem" in str(ei.value) and "check" in str(ei.value) and "backup" in str(ei.value)
    (tmp_path / "new.md").write_text("a new note")
    commands = [
        ["stats"],
        ["search", "term1"],
        ["get", "d1"],
        ["ingest", str(tmp_path / "new.md")],
        ["backup", str(tmp_path / "copy.db")],
        ["serve", "--port", str(_free_port())],
    ]
    for args in commands:
        r = run(store, *args)
        assert r.returncode == 4, (args, r.stdout, r.stderr)
        assert f"the store {store} is damaged: " in r.stderr, (args, r.stderr)
        assert "restore a backup" in r.stderr and "check" in r.stderr
        no_traceback(r)
    assert not (tmp_path / "copy.db").exists()


def test_the_check_at_open_follows_the_file_not_the_first_look(store: Path) -> None:
    # verified once in this process, then damaged in place: the next open checks again
    Memory(store, embedder="hash", auto_embed=False).close()
    damage(store)
    with pytest.raises(StoreError, match="is damaged"):
        Memory(store, embedder="hash", auto_embed=False)


def test_check_lists_every_problem(store: Path) -> None:
    r = run(store, "check")
    assert r.returncode == 0, r.stderr
    assert "default: 400 documents, 400 chunks, 400 vectors, 0 pending vectors" in r.stdout
    assert "ok:" in r.stdout
    r = run(store, "check", "--json")
    report = json.loads(r.stdout)
    assert r.returncode == 0 and report["ok"] is True and report["problems"] == []
    assert report["namespaces"]["default"] == {"documents": 400, "chunks": 400, "vectors": 400, "pending_vectors": 0}

    # break the store's own invariants (SQLite's structure stays sound)
    db = sqlite3.connect(store)
    ns = db.execute("SELECT id FROM namespaces WHERE name='default'").fetchone()[0]
    rowid = db.execute("SELECT id FROM chunks WHERE chunk_id='d1_p1'").fetchone()[0]
    db.execute(f"DELETE FROM tokens_{ns} WHERE rowid=?", (rowid,))  # a chunk BM25 cannot find
    db.execute("INSERT INTO vectors VALUES (999999, x'00')")  # a vector of no chunk, of the wrong size
    db.execute("INSERT INTO embed_queue VALUES (999998, '2024-01-01')")  # queued, no chunk
    db.execute("DELETE FROM documents WHERE doc_id='d2'")  # a chunk without its document
    db.execute("DELETE FROM vectors WHERE chunk_rowid=(SELECT id FROM chunks WHERE chunk_id='d3_p1')")  # lost
    db.commit()
    db.close()
    r = run(store, "check", "--json")
    assert r.returncode == 4, r.stderr
    problems = json.loads(r.stdout)["problems"]
    expected = [
        "namespace 'default': 1 chunks without their BM25 row",
        "namespace 'default': 1 chunks without their document",
        "namespace 'default': 1 chunks with neither a vector nor a place in the embedding queue",
        "1 vectors of missing chunks",
        "1 embedding queue entries of missing chunks",
        "1 vectors whose size is not the recorded dimension 256",
    ]
    assert sorted(problems) == sorted(expected), problems
    r = run(store, "check")
    assert r.returncode == 4 and "problem: 1 vectors of missing chunks" in r.stderr
    no_traceback(r)


def test_check_examines_a_damaged_store_the_open_refuses(store: Path) -> None:
    damage(store)
    r = run(store, "check", "--json")
    assert r.returncode == 4, r.stderr
    report = json.loads(r.stdout)
    assert report["ok"] is False and report["problems"]
    r = run(store, "check")
    assert r.returncode == 4 and "problem: " in r.stderr
    no_traceback(r)


def test_stats_reports_damage_found_after_the_open(store: Path, tmp_path: Path, monkeypatch) -> None:
    """Damage past what the check at open looked at (a big store checked in part) fails stats
    cleanly too."""
    from typer.testing import CliRunner

    from hybridmem.cli.root import app
    from hybridmem.store.sqlite import SQLiteStore

    damage_table(store, "documents")
    monkeypatch.setattr(SQLiteStore, "_verify_once", lambda self: None, raising=False)  # no check at open
    r = CliRunner().invoke(app, ["--db", str(store), "--embedder", "hash", "stats"])
    assert r.exit_code == 4, r.output
    assert "reading the store" in r.output and "check" in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)


def test_search_reports_damage_found_after_the_open(store: Path, monkeypatch) -> None:
    """A search that meets damaged pages after the open (checked in part, or damaged since) is a
    StoreError naming the file and `hybridmem check`, not a bare sqlite3 error (a 500 in serve)."""
    from hybridmem.store.sqlite import SQLiteStore

    damage_table(store, "documents")
    monkeypatch.setattr(SQLiteStore, "_verify_once", lambda self: None, raising=False)
    with Memory(store, embedder="hash", auto_embed=False) as m:
        with pytest.raises(StoreError, match="hybridmem check") as e:
            m.search("term1 term2", mode="bm25", metadata_filter={"k": 1})
        assert str(store) in str(e.value)


# ---------------------------------------------------------------- 0-byte files
def test_an_empty_file_is_no_store_unless_told_to_create(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    for args in (["stats"], ["search", "anything"], ["check"]):
        r = run(empty, *args)
        assert r.returncode == 3, (args, r.stderr)
        assert "is an empty file (0 bytes)" in r.stderr and "ingest" in r.stderr, r.stderr
        no_traceback(r)
    assert empty.stat().st_size == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]
    with pytest.raises(NotFoundError, match="empty file"):
        Memory(empty, embedder="hash", create=False)
    # ingest creates: the empty file becomes a store
    r = run(empty, "ingest", "-", "--id", "n1", stdin="the first note in a new store")
    assert r.returncode == 0, r.stderr
    r = run(empty, "search", "first note", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["results"][0]["chunk_id"].startswith("n1")


# ---------------------------------------------------------------- read-only stores
def _read_only(store: Path) -> None:
    for f in store.parent.iterdir():
        f.chmod(0o444)
    store.parent.chmod(0o555)


def _writable(store: Path) -> None:
    store.parent.chmod(0o755)
    for f in store.parent.iterdir():
        f.chmod(0o644)


@pytest.fixture
def permission_prefix() -> Iterator[list[str]]:
    """How to run the CLI so that permission bits apply to it (as root: setpriv dropping the
    capabilities that override them; skip when that is not possible)."""
    if os.geteuid() != 0:
        yield []
        return
    if _SETPRIV is None or subprocess.run([*_DROP_CAPS, "true"], capture_output=True).returncode != 0:
        pytest.skip("running as root, and cannot drop CAP_DAC_OVERRIDE (setpriv): chmod would not apply")
    yield _DROP_CAPS


def test_a_read_only_store_answers_reads_and_refuses_writes(tmp_path: Path, permission_prefix: list[str]) -> None:
    store = build(tmp_path / "ro" / "m.db")
    before = sorted(p.name for p in store.parent.iterdir())
    _read_only(store)
    try:
        r = run(store, "stats", "--json", prefix=permission_prefix)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["documents"] == 400
        r = run(store, "search", "term7", "--json", prefix=permission_prefix)
        assert r.returncode == 0 and json.loads(r.stdout)["results"], r.stderr
        r = run(store, "check", prefix=permission_prefix)
        assert r.returncode == 0 and "ok:" in r.stdout, r.stderr
        for args, stdin in ((["ingest", "-", "--id", "x"], "a new note"), (["delete", "d1"], None)):
            r = run(store, *args, stdin=stdin, prefix=permission_prefix)
            assert r.returncode == 4, (args, r.stdout, r.stderr)
            assert f"the store {store} is read-only: " in r.stderr and "not a hybridmem store" not in r.stderr
            no_traceback(r)
        assert sorted(p.name for p in store.parent.iterdir()) == before  # nothing created beside it
    finally:
        _writable(store)
    with Memory(store, embedder="hash", auto_embed=False) as mem:  # writable again: untouched, and writes work
        assert mem.stats().documents == 400
        mem.add("written once the store is writable again", id="later")


def test_a_read_only_store_is_read_through_its_write_ahead_log(tmp_path: Path, permission_prefix: list[str]) -> None:
    """A writer holds the store open (its last writes only in the -wal) while the directory is
    read-only for the reader: the reader sees them (mode=ro, not immutable, which would not)."""
    store = build(tmp_path / "ro" / "m.db", n=50)
    writer = Memory(store, embedder="hash", auto_embed=False)
    try:
        writer.add("only in the write-ahead log so far: zebra", id="wal-only")
        assert Path(f"{store}-wal").stat().st_size > 0
        _read_only(store)
        try:
            r = run(store, "search", "zebra", "--mode", "bm25", "--json", prefix=permission_prefix)
            assert r.returncode == 0, r.stderr
            assert [h["chunk_id"] for h in json.loads(r.stdout)["results"]] == ["wal-only_p1"]
        finally:
            _writable(store)
    finally:
        writer.close()


def test_the_read_only_option_opens_for_reads_only(store: Path) -> None:
    """``store_options={"read_only": True}`` (works as root too: SQLite's mode=ro refuses writes)."""
    data = store.read_bytes()
    with Memory(store, embedder="hash", auto_embed=False, store_options={"read_only": True}) as mem:
        assert mem.stats().documents == 400
        assert mem.search("term7", mode="bm25").results
        with pytest.raises(StoreError, match=r"is read-only: it was opened read-only"):
            mem.add("a new note", id="new")
        with pytest.raises(StoreError, match="is read-only"):
            mem.delete(["d1"])
    assert store.read_bytes() == data


# ---------------------------------------------------------------- backup
def test_backup_while_another_thread_writes(store: Path, tmp_path: Path) -> None:
    dest = tmp_path / "backups" / "copy.db"
    stop, written = threading.Event(), [0]
    with Memory(store, embedder="hash", auto_embed=False) as mem:

        def write() -> None:
            while not stop.is_set():
                mem.add(f"note {written[0]} about term{written[0] % 50}", id=f"w{written[0]}")
                written[0] += 1

        writer = threading.Thread(target=write)
        writer.start()
        try:
            while written[0] < 5:
                time.sleep(0.01)
            for _ in range(5):  # until writes landed while the copy ran (nearly always the first time)
                before = written[0]
                res = mem.store.backup(dest)  # type: ignore[attr-defined]
                during = written[0] - before
                if during:
                    break
        finally:
            stop.set()
            writer.join()
    assert during > 0, "no write happened while the backup ran"
    assert res["path"] == str(dest) and res["bytes"] == dest.stat().st_size > 0 and res["seconds"] > 0
    assert not Path(f"{dest}.tmp").exists()
    # the copy is one consistent snapshot: whole write transactions, every index agreeing
    with Memory(dest, embedder="hash", auto_embed=False, create=False) as copy:
        report = copy.store.check()  # type: ignore[attr-defined]
        assert report["ok"], report["problems"]
        counts = report["namespaces"]["default"]
        assert 400 + before <= counts["documents"] <= 400 + before + during + 1
        assert counts["documents"] == counts["chunks"] == res["documents"] == res["chunks"]
        assert counts["vectors"] + counts["pending_vectors"] == counts["chunks"]


def test_backup_command(store: Path, tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    r = run(store, "backup", str(out_dir))  # a directory: the copy goes in it, under the store's name
    assert r.returncode == 0, r.stderr
    assert f"to {out_dir / 'm.db'}:" in r.stdout and (" KiB in " in r.stdout or " MiB in " in r.stdout)
    assert "400 documents, 400 chunks; quick_check ok" in r.stdout
    r = run(store, "ingest", "-", "--id", "extra", stdin="one more note")
    assert r.returncode == 0, r.stderr
    r = run(store, "backup", str(out_dir / "m.db"), "--json")  # replaces the previous copy
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["documents"] == 401
    assert sorted(p.name for p in out_dir.iterdir()) == ["m.db"]
    r = run(out_dir / "m.db", "check")
    assert r.returncode == 0, r.stderr
    # refused: the store itself, and a file some process has open (a -wal beside it)
    r = run(store, "backup", str(store))
    assert r.returncode == 2 and "is the store itself" in r.stderr
    (out_dir / "m.db-wal").write_bytes(b"")
    r = run(store, "backup", str(out_dir / "m.db"))
    assert r.returncode == 4 and "in use" in r.stderr
    no_traceback(r)


def test_backup_of_a_postgresql_store_points_to_pg_dump(tmp_path: Path) -> None:
    r = run("postgresql://me:secret@db.example/mem", "backup", str(tmp_path / "mem.dump"))
    assert r.returncode == 2, r.stderr
    assert "pg_dump --format=custom --schema=hybridmem" in r.stderr
    assert "postgresql://me:***@db.example/mem" in r.stderr and "secret" not in r.stderr
    no_traceback(r)
