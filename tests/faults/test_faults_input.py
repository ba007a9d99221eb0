"""Corrupt and hostile input (issue 8, faults).

* A truncated SQLite file, a non-SQLite file (random bytes, text, a directory) or another
  application's SQLite database given as the store: a clear error that names the file and says it
  is not a hybridmem store, a non-zero exit code and no traceback from the CLI, and the file left
  byte for byte as it was.
* Hostile ingest (binary files, invalid UTF-8, a 1 MB single line, files and texts over the limits,
  deeply nested metadata, metadata keys with SQL or JSON-path syntax): a clear error naming the
  problem, or safe handling (stored, and found by an exact filter on that key), and in every case
  the documents ingested before are all still there and still found by both legs.
"""

from __future__ import annotations

import gc
import json
import os
import random
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hybridmem import Memory, config
from hybridmem.cli import app
from hybridmem.errors import FilterError, HybridMemError, StoreError, ValidationError

# ------------------------------------------------------------------------------ corrupt stores


@pytest.fixture(scope="module")
def store_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The bytes of a real, checkpointed hybridmem store (a few pages), to cut short."""
    path = tmp_path_factory.mktemp("good") / "good.db"
    with Memory(path, embedder="hash", auto_embed=False) as m:
        m.add_documents([{"id": f"d{i}", "text": f"document {i} about pools and caches " * 30} for i in range(40)])
        m.wait_for_vectors()
    data = path.read_bytes()
    assert data[:16] == b"SQLite format 3\x00" and len(data) > 16 * 4096
    assert not Path(f"{path}-wal").exists()  # closed cleanly: everything is in the main file
    return data


def _foreign_sqlite(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE notes (body TEXT)")
    db.execute("INSERT INTO notes VALUES ('another application keeps its data here')")
    db.commit()
    db.close()


CORRUPT = {
    "random-bytes": lambda p, good: p.write_bytes(random.Random(8).randbytes(8192)),
    "text-file": lambda p, good: p.write_text("These are my notes, not a database.\n" * 100),
    "json-file": lambda p, good: p.write_text(json.dumps({"memories": ["a", "b"]})),
    "sqlite-magic-only": lambda p, good: p.write_bytes(good[:16]),
    "truncated-in-header": lambda p, good: p.write_bytes(good[:100]),
    "truncated-to-one-page": lambda p, good: p.write_bytes(good[:4096]),
    "truncated-in-half": lambda p, good: p.write_bytes(good[: len(good) // 2]),
    "directory": lambda p, good: p.mkdir(),
}


def _snapshot(p: Path) -> bytes | list[str]:
    return sorted(os.listdir(p)) if p.is_dir() else p.read_bytes()


@pytest.fixture(params=sorted(CORRUPT))
def corrupt(
    request: pytest.FixtureRequest, tmp_path: Path, store_bytes: bytes
) -> Iterator[tuple[Path, bytes | list[str]]]:
    p = tmp_path / f"{request.param}.db"
    CORRUPT[request.param](p, store_bytes)
    before = _snapshot(p)
    yield p, before
    assert _snapshot(p) == before, f"{p.name} was modified"  # checked after every use


def _clear_error(message: str, path: Path) -> None:
    # the CLI's console wraps long lines: at spaces, and inside a long path
    assert str(path) in message.replace("\n", ""), message
    words = " ".join(message.split())
    assert (
        "not a hybridmem store" in words
        or "is a directory, not a memory store file" in words
        or ("is damaged" in words and "check` to list every problem" in words)  # a truncated file: quick_check at open
    ), message
    assert "Traceback" not in message


def test_memory_refuses_a_corrupt_store(corrupt: tuple[Path, bytes]) -> None:
    path, _ = corrupt
    for create in (True, False):
        with pytest.raises(StoreError) as exc:
            Memory(path, embedder="hash", auto_embed=False, create=create)
        _clear_error(str(exc.value), path)


@pytest.mark.parametrize(
    "args", [["stats"], ["search", "pools"], ["get", "d1"], ["ingest", "NOTE"], ["embed"]], ids=lambda a: a[0]
)
def test_cli_refuses_a_corrupt_store(corrupt: tuple[Path, bytes], args: list[str], tmp_path: Path) -> None:
    path, _ = corrupt
    note = tmp_path / "note.md"
    note.write_text("A note that must not end up in a corrupt file.")
    args = [str(note) if a == "NOTE" else a for a in args]
    r = CliRunner().invoke(app, ["--db", str(path), "--embedder", "hash", *args])
    assert r.exit_code == StoreError.exit_code, (r.exit_code, r.output)
    assert isinstance(r.exception, SystemExit)  # a clean exit, not an exception escaping the command
    assert r.stderr.startswith("error:") and len(r.stderr.strip().splitlines()) <= 3, r.stderr
    _clear_error(r.stderr, path)
    assert r.stdout == ""


@pytest.mark.parametrize("kind", ["random-bytes", "truncated-in-half", "directory"])
def test_cli_process_on_a_corrupt_store(kind: str, tmp_path: Path, store_bytes: bytes) -> None:
    """The real command, as a user runs it: one line on stderr, exit code 4, no traceback."""
    path = tmp_path / "x.db"
    CORRUPT[kind](path, store_bytes)
    before = _snapshot(path)
    r = subprocess.run(
        [sys.executable, "-m", "hybridmem.cli", "--db", str(path), "stats"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "300"},
    )
    assert r.returncode == 4, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and r.stdout == ""
    assert r.stderr.startswith("error:")
    _clear_error(r.stderr, path)
    assert _snapshot(path) == before
    assert sorted(os.listdir(tmp_path)) == ["x.db"]  # no -wal / -shm left next to it


def test_another_applications_sqlite_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    _foreign_sqlite(path)
    with pytest.raises(StoreError, match="is an SQLite file but not a hybridmem store") as exc:
        Memory(path, embedder="hash", auto_embed=False)
    assert str(path) in str(exc.value)
    r = CliRunner().invoke(app, ["--db", str(path), "stats"])
    assert r.exit_code == 4 and "not a hybridmem store" in r.stderr
    db = sqlite3.connect(path)  # its data is intact and it gained no hybridmem table
    assert db.execute("SELECT body FROM notes").fetchall() == [("another application keeps its data here",)]
    assert {r[0] for r in db.execute("SELECT name FROM sqlite_master")} == {"notes"}
    db.close()


def test_another_applications_sqlite_database_is_left_unmodified(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    _foreign_sqlite(path)
    before = path.read_bytes()
    with pytest.raises(StoreError):
        Memory(path, embedder="hash", auto_embed=False)
    CliRunner().invoke(app, ["--db", str(path), "stats"])
    # fails: header bytes 18-19 (file format write/read version) go from 1 (rollback journal) to 2 (WAL)
    assert path.read_bytes() == before
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    db.close()


def test_a_refused_store_leaves_nothing_behind(tmp_path: Path, store_bytes: bytes) -> None:
    path = tmp_path / "cut.db"
    path.write_bytes(store_bytes[: len(store_bytes) // 2])
    gc.disable()  # deterministic: the leaked connection sits in a reference cycle (frame <-> traceback)
    try:
        try:
            Memory(path, embedder="hash", auto_embed=False)
        except StoreError:
            pass
        left = sorted(os.listdir(tmp_path))
    finally:
        gc.enable()
        gc.collect()
    assert left == ["cut.db"]  # fails: ['cut.db', 'cut.db-shm', 'cut.db-wal']


def test_an_empty_file_is_an_empty_store(tmp_path: Path) -> None:
    """SQLite reads a 0-byte file as an empty database: it becomes a new, working store (the only
    file of the lot hybridmem writes to; nothing was in it to lose)."""
    path = tmp_path / "empty.db"
    path.touch()
    with Memory(path, embedder="hash", auto_embed=False) as m:
        assert m.stats().documents == 0 and m.store.integrity_check() == "ok"
        m.add("now it holds a note about HEL-4040", id="n")
        assert m.search("HEL-4040", mode="bm25").results[0].doc_id == "n"


def test_a_store_from_a_newer_hybridmem_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    with Memory(path, embedder="hash", auto_embed=False) as m:
        m.add("a note", id="n")
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version=999")
    db.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match="schema version 999, newer than this hybridmem"):
        Memory(path, embedder="hash", auto_embed=False)
    assert path.read_bytes() == before


# ------------------------------------------------------------------------------ hostile ingest
BASE = {
    "pool": ("PostgreSQL pool exhaustion causes HTTP 504 on billing. Raise max_connections to 200.", "production"),
    "cache": ("Purge the connector cache when a data source returns stale results.", "production"),
    "err": ("HEL-4040 means the pipeline definition was rejected by strict validation.", "staging"),
}


@pytest.fixture
def base(tmp_path: Path) -> Iterator[Memory]:
    m = Memory(tmp_path / "base.db", embedder="hash", auto_embed=False)
    for i, (text, env) in BASE.items():
        m.add(text, id=i, metadata={"environment": env, "severity": len(i)})
    m.wait_for_vectors()
    try:
        yield m
        assert_intact(m)  # after every hostile input
    finally:
        m.close()


def assert_intact(m: Memory, extra_docs: int = 0) -> None:
    """The documents ingested before the hostile input are all there and found by both legs."""
    m.wait_for_vectors()
    s = m.stats()
    assert s.documents >= len(BASE) and s.vectors == s.chunks and s.pending_vectors == 0
    assert m.store.integrity_check() == "ok"
    for doc_id, (text, env) in BASE.items():
        assert m.get(doc_id)["metadata"]["environment"] == env
        assert m.search(text, mode="bm25", top_k=1).results[0].doc_id == doc_id
        assert m.search(text, mode="vector", top_k=1).results[0].doc_id == doc_id
    assert [r.doc_id for r in m.search("HEL-4040", top_k=1).results] == ["err"]
    prod = m.search("pool cache", top_k=10, metadata_filter={"environment": "production"}).results
    assert {"pool", "cache"} <= {r.doc_id for r in prod}  # the filter still applies, both ways
    assert all(r.metadata["environment"] == "production" for r in prod)
    assert m.store.reader.execute("SELECT count(*) FROM chunks").fetchone()[0] == s.chunks


def _counts(m: Memory) -> tuple[int, int]:
    s = m.stats()
    return s.documents, s.chunks


def test_binary_and_non_utf8_files_are_skipped_by_name(base: Memory, tmp_path: Path) -> None:
    d = tmp_path / "in"
    d.mkdir()
    (d / "image.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + random.Random(1).randbytes(4000))
    (d / "latin1.txt").write_bytes("Réglage du délai d'expiration".encode("latin-1"))
    (d / "cut-utf8.md").write_bytes("naïve café ".encode() * 10 + "é".encode()[:1])  # a multi-byte char cut short
    (d / "program.bin").write_bytes(b"\x7fELF" + bytes(range(256)) * 8)  # not a text suffix: not even read
    (d / "good.md").write_text("# Runbook\n\nRestart the gateway when HEL-5050 appears.")
    before = _counts(base)
    report = base.ingest_path(d)
    assert report.added == ["in/cut-utf8", "in/good", "in/latin1"]
    reasons = {Path(s["path"]).name: s["reason"] for s in report.skipped}
    assert set(reasons) == {"image.md"}
    assert "binary file (NUL bytes)" in reasons["image.md"] and report.skipped[0]["path"] == "in/image.md"
    notes = {n["path"]: n["message"] for n in report.notes}
    # Latin-1 is detected (cp1252 is its superset); a UTF-8 file cut mid-character stays UTF-8
    assert "cp1252" in notes["in/latin1.txt"]
    assert "1 invalid byte replaced" in notes["in/cut-utf8.md"]
    assert "Réglage du délai" in base.get("in/latin1")["chunks"][0]["text"]
    assert base.get("in/cut-utf8")["chunks"][0]["text"].startswith("naïve café naïve")
    assert _counts(base) == (before[0] + 3, before[1] + 3)
    assert base.search("HEL-5050", mode="bm25").results[0].doc_id == "in/good"


def test_undetectable_and_forced_encodings(base: Memory, tmp_path: Path) -> None:
    d = tmp_path / "enc"
    d.mkdir()
    rng = random.Random(3)
    (d / "noise.txt").write_bytes(bytes(rng.randrange(1, 256) for _ in range(3000)))
    (d / "utf16.txt").write_bytes("Größe der Warteschlange: 42".encode("utf-16"))
    report = base.ingest_path(d)
    assert report.added == ["enc/utf16"]  # a BOM says the encoding; NUL bytes of UTF-16 are not "binary"
    assert report.skipped[0]["path"] == "enc/noise.txt" and "--encoding" in report.skipped[0]["reason"]
    assert "Größe" in base.get("enc/utf16")["chunks"][0]["text"]
    (d / "koi8.txt").write_bytes("Привет, мир".encode("koi8_r"))
    report = base.ingest_path(d / "koi8.txt", encoding="koi8_r", root=tmp_path)
    assert "Привет" in base.get("enc/koi8")["chunks"][0]["text"] and report.notes == []
    with pytest.raises(ValidationError, match="unknown encoding 'nope'"):
        base.ingest_path(d / "koi8.txt", encoding="nope")


def test_binary_text_is_refused_by_add(base: Memory) -> None:
    before = _counts(base)
    with pytest.raises(ValidationError, match="NUL characters"):
        base.add("looks like text\x00\x01\x02 but is binary", id="bin")
    with pytest.raises(ValidationError, match="unpaired surrogate"):
        base.add("broken \udcff surrogate from a bad decode", id="sur")
    with pytest.raises(ValidationError, match="must not be empty"):
        base.add(" \n\t ", id="blank")
    # a batch with one bad document fails whole and writes nothing, not even its good documents
    with pytest.raises(ValidationError, match="NUL"):
        base.add_documents(
            [{"id": "ok1", "text": "fine"}, {"id": "bad", "text": "a\x00b"}, {"id": "ok2", "text": "fine"}]
        )
    assert _counts(base) == before
    with pytest.raises(HybridMemError):
        base.get("ok1")


def test_a_late_nul_byte_skips_that_file_only(base: Memory, tmp_path: Path) -> None:
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.md").write_text("First good note about HEL-6060.")
    (d / "b.log.txt").write_bytes(b"GET /health 200\n" * 600 + b"\x00\x00 core dump follows")
    (d / "c.md").write_text("Second good note about HEL-7070.")
    report = base.ingest_path(d)  # fails: ValidationError "text: text contains NUL characters (binary data?)"
    assert sorted(report.added) == ["in/a", "in/c"]
    assert [Path(s["path"]).name for s in report.skipped] == ["b.log.txt"]


def test_a_one_megabyte_single_line(base: Memory, tmp_path: Path) -> None:
    words = tmp_path / "words.txt"
    words.write_text(" ".join(f"w{i}" for i in range(140_000)) + " needle-9f3e " + " ".join(f"v{i}" for i in range(5)))
    blob = tmp_path / "blob.txt"
    blob.write_text(random.Random(2).randbytes(750_000).hex())  # 1.5 MB, not one space
    assert words.stat().st_size > 1_000_000 and "\n" not in words.read_text()
    before = _counts(base)
    r1 = base.ingest_path(words)
    r2 = base.ingest_path(blob)
    assert r1.added == ["words"] and r2.added == ["blob"] and not r1.skipped and not r2.skipped
    for doc_id, path in (("words", words), ("blob", blob)):
        chunks = [c["text"] for c in base.get(doc_id)["chunks"]]
        assert len(chunks) > 500
        assert max(map(len, chunks)) <= config.DEFAULT_CHUNK_SIZE  # cut, not one giant chunk
        # nothing lost or altered at the cuts (hard cuts do not overlap; the chunker may turn the space
        # between two packed pieces into a paragraph break)
        assert "".join("".join(chunks).split()) == "".join(path.read_text().split())
    assert base.search("needle-9f3e", mode="bm25", top_k=1).results[0].doc_id == "words"
    assert base.search("w129999", mode="bm25", top_k=1).results[0].doc_id == "words"
    assert _counts(base)[0] == before[0] + 2


def test_one_size_limit_for_files_and_texts(base: Memory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "big"
    d.mkdir()
    big = d / "huge.txt"
    with open(big, "wb") as f:  # sparse: the limit + 1 byte without writing them
        f.truncate(config.MAX_DOCUMENT_BYTES + 1)
    (d / "fine.md").write_text("A small file next to the huge one.")
    before = _counts(base)
    report = base.ingest_path(d)  # the big file is named and skipped; the directory goes on
    assert report.added == ["big/fine"] and [s["path"] for s in report.skipped] == ["big/huge.txt"]
    assert f"larger than the {config.MAX_DOCUMENT_BYTES}-byte document limit" in report.skipped[0]["reason"]
    # the same limit, read when used, holds for a file, a JSON record and the API, in UTF-8 bytes
    monkeypatch.setattr(config, "MAX_DOCUMENT_BYTES", 1000)
    (d / "mid.txt").write_text("x " * 600)
    (d / "recs.json").write_text(
        json.dumps([{"id": "r-ok", "text": "ok"}, {"id": "r-big", "text": "é" * 600}], ensure_ascii=False)
    )
    report = base.ingest_path(d)  # bigger on disk than the limit: not even read
    assert {s["path"] for s in report.skipped} == {"big/huge.txt", "big/mid.txt", "big/recs.json"}
    assert "bytes is larger than the 1000-byte document limit" in str(report.skipped)
    (d / "recs.json").write_text(
        json.dumps([{"id": "r-ok", "text": "ok"}, {"id": "r-big", "text": "é" * 450}], ensure_ascii=False)
    )
    report = base.ingest_path(d / "recs.json")  # 950 bytes of file, 900 bytes of text: read, the record is kept
    assert report.added == ["r-ok", "r-big"]
    with pytest.raises(ValidationError, match=r"text of 1001 bytes \(UTF-8\) exceeds the 1000-byte"):
        base.add("y" * 1001, id="too-long")
    with pytest.raises(ValidationError, match="exceeds"):
        base.add_documents([{"id": "a", "text": "ok"}, {"id": "b", "text": "z" * 2000}])
    assert _counts(base) == (before[0] + 3, before[1] + 3)


def _nested(depth: int, leaf: object = 1) -> object:
    out = leaf
    for i in range(depth):
        out = {"k": out} if i % 2 else [out]
    return out


@pytest.mark.parametrize("depth", [17, 40, 5000])
def test_deeply_nested_metadata_is_a_validation_error(base: Memory, depth: int) -> None:
    before = _counts(base)
    with pytest.raises(ValidationError, match="nested deeper than 16 levels") as exc:
        base.add("a note with absurd metadata", id="deep", metadata={"a": _nested(depth)})
    assert exc.value.field == "metadata"
    assert _counts(base) == before


def test_metadata_nested_within_the_limit_round_trips(base: Memory) -> None:
    meta = {"a": _nested(15, "leaf"), "tags": ["x", {"y": [1, 2.5, None, True]}]}
    base.add("a note with nested metadata", id="nested", metadata=meta)
    assert base.get("nested")["metadata"] == meta
    hits = base.search("nested metadata", top_k=5, metadata_filter={"a": {"$exists": True}}).results
    assert [h.doc_id for h in hits] == ["nested"] and hits[0].metadata == meta


def test_deeply_nested_json_records_in_files(base: Memory, tmp_path: Path) -> None:
    too_deep_to_parse = tmp_path / "bomb.json"
    too_deep_to_parse.write_text('[{"text": "x", "metadata": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}}]")
    report = base.ingest_path(too_deep_to_parse)  # a JSON bomb: skipped, named, no RecursionError
    assert report.added == [] and "JSON nested too deeply" in report.skipped[0]["reason"]
    assert report.skipped[0]["path"].endswith("bomb.json")
    parses_but_too_deep = tmp_path / "deep.json"
    parses_but_too_deep.write_text(json.dumps([{"id": "deep-rec", "text": "x", "metadata": {"a": _nested(30)}}]))
    before = _counts(base)
    report = base.ingest_path(parses_but_too_deep)  # that record is skipped and named, nothing else lost
    assert report.added == [] and len(report.skipped) == 1
    assert "nested deeper than 16 levels" in report.skipped[0]["reason"]
    assert "deep.json" in report.skipped[0]["path"] or "deep-rec" in report.skipped[0]["path"]
    assert _counts(base) == before
    with pytest.raises(ValidationError, match="nested deeper than 16 levels"):  # the API call still refuses it
        base.add_documents([{"id": "deep-rec", "text": "x", "metadata": {"a": _nested(30)}}])


SQLISH_KEYS = [
    "a'; DROP TABLE chunks;--",
    "a.b",
    "[0]",
    "x') OR 1=1 --",
    "a]b[",
    "*",
    "key with spaces",
    "ünï-cödé_键",
    "1",
    "a$b",
    "-- comment",
    "a'b",
]


@pytest.mark.parametrize("key", SQLISH_KEYS)
def test_metadata_keys_with_sql_or_json_path_syntax_are_plain_keys(base: Memory, key: str) -> None:
    base.add("a note with a hostile key", id="hostile", metadata={key: "v1", "n": 1})
    base.add("a twin note without it", id="twin", metadata={"n": 1})
    base.wait_for_vectors()
    assert base.get("hostile")["metadata"][key] == "v1"
    assert key in base.stats().metadata_keys
    for flt, expected in [
        ({key: "v1"}, ["hostile"]),
        ({key: "v2"}, []),
        ({key: {"$in": ["v0", "v1"]}}, ["hostile"]),
        ({key: {"$exists": True}}, ["hostile"]),
        ({key: {"$exists": False}}, ["twin"]),
        ({key: {"$ne": "v1"}}, ["twin"]),
        ({"$or": [{key: "v1"}, {"n": 2}]}, ["hostile"]),
    ]:
        flt = {"$and": [{"n": 1}, flt]}  # the two notes only: the base documents have no key "n"
        for mode in ("bm25", "vector", "hybrid"):
            hits = base.search("note", mode=mode, top_k=10, metadata_filter=flt).results
            assert sorted(h.doc_id for h in hits) == expected, (mode, flt)
    tables = {r[0] for r in base.store.reader.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"chunks", "documents", "vectors", "embed_queue"} <= tables


def test_a_dotted_key_is_not_a_json_path(base: Memory) -> None:
    base.add("dotted key note", id="dotted", metadata={"a.b": 1})
    base.add("nested key note", id="nested", metadata={"a": {"b": 1}})
    assert [h.doc_id for h in base.search("note", top_k=10, metadata_filter={"a.b": 1}).results] == ["dotted"]
    assert [h.doc_id for h in base.search("key note", top_k=10, metadata_filter={"a": {"$exists": True}}).results] == [
        "nested"
    ]


@pytest.mark.parametrize(
    ("key", "needle"),
    [
        ("$.x", "leading '$'"),
        ('a"b', "no quotes"),
        ("a\\b", "backslashes"),
        ("tab\there", "control"),
        ("", "1-128 characters"),
        ("k" * 129, "1-128 characters"),
    ],
)
def test_metadata_keys_the_filter_grammar_cannot_address_are_refused(base: Memory, key: str, needle: str) -> None:
    before = _counts(base)
    with pytest.raises(ValidationError, match="invalid metadata key") as exc:
        base.add("a note", id="bad-key", metadata={key: 1})
    assert needle in str(exc.value) and exc.value.field == "metadata"
    with pytest.raises(FilterError):
        base.search("note", metadata_filter={key: 1})
    assert _counts(base) == before


def test_sql_in_metadata_values_and_filters_is_data(base: Memory) -> None:
    evil = "'; DROP TABLE chunks; --"
    base.add("a note with an evil value", id="evil", metadata={"environment": evil})
    hits = base.search("note evil", top_k=10, metadata_filter={"environment": evil}).results
    assert [h.doc_id for h in hits] == ["evil"]
    assert base.search("note", metadata_filter={"environment": "x' OR '1'='1"}).results == []
    with pytest.raises(FilterError, match="unknown filter operator"):
        base.search("note", metadata_filter={"environment": {"$where": "1=1"}})
    with pytest.raises(FilterError, match="unknown filter operator"):
        base.search("note", metadata_filter={"$.environment": "x"})


def test_cli_hostile_meta_and_filter(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    note = tmp_path / "n.md"
    note.write_text("A note from the command line about HEL-8080.")
    runner = CliRunner()
    key = "a'; DROP TABLE chunks;--"
    r = runner.invoke(app, ["--db", str(db), "--embedder", "hash", "ingest", str(note), "--meta", f"{key}=v1"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["--db", str(db), "search", "HEL-8080", "--json", "--filter-json", json.dumps({key: "v1"})])
    assert r.exit_code == 0, r.output
    assert [x["doc_id"] for x in json.loads(r.stdout)["results"]] == ["n"]
    deep: dict = {"a'; DROP TABLE chunks;--": "v1"}
    for _ in range(200):
        deep = {"$or": [deep]}
    deep = json.dumps(deep)
    r = runner.invoke(app, ["--db", str(db), "search", "HEL-8080", "--filter-json", deep])
    assert r.exit_code == 2 and "Traceback" not in r.output and r.stderr.startswith("error:")
    assert "nested deeper than 8 levels" in " ".join(r.stderr.split())
    r = runner.invoke(app, ["--db", str(db), "ingest", str(note), "--meta", "$bad=1"])
    assert r.exit_code == 2 and "invalid metadata key" in " ".join(r.stderr.split())
    r = runner.invoke(app, ["--db", str(db), "stats", "--json"])
    assert json.loads(r.stdout)["documents"] == 1
