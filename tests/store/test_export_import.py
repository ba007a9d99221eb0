"""``hybridmem export`` / ``import`` (issue 43): SQLite → file → PostgreSQL → file gives the same
file (but the header's export time and source) and the same results, history and ``as_of``
included; an import is idempotent, checked whole before the store sees any of it, refuses what it
cannot read, and reuses vectors only of the store's embedder."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from test_migrate import _memory_state, _search_ids
from typer.testing import CliRunner

from hybridmem import Memory
from hybridmem.cli import app
from hybridmem.demo import load_documents
from hybridmem.errors import StoreError, ValidationError
from hybridmem.transfer import FORMAT, export_to, import_into

QUERIES = ("HEL-4040 gateway timeout", "postgres max_connections", "user lives in city")


def _build(db: Path) -> dict:
    with Memory(db, embedder="hash") as m:
        m.add_documents(load_documents())
        m.add("The user lives in Lyon.", id="city", metadata={"user_id": "u1"}, occurred_at="2023-05-01T10:00:00Z")
        m.update("city", "The user lives in Berlin now.", reason="moved")
        m.add("Billing pool is 100 connections.", key="billing.pool", metadata={"user_id": "u1"}, id="pool")
        m.add("Billing pool is 200 connections.", key="billing.pool", metadata={"user_id": "u1"})
        m.add("an old note", id="gone")
        m.forget("gone", reason="obsolete")
        m.add_messages(
            [
                {"role": "user", "content": "Kafka consumers are lagging.", "timestamp": "2023-05-02T09:00:00Z"},
                {"role": "assistant", "content": "Raise the partitions.", "timestamp": "2023-05-02T09:01:00Z"},
            ],
            session_id="s1",
        )
        m.add("acme's own note about HEL-4040", id="a1", namespace="acme", metadata={"env": "prod"})
        m.embed_pending()
        m.graph.build()
        return {"state": _memory_state(m), "hits": {q: _search_ids(m, q) for q in QUERIES}}


def _first_difference(a: list[str], b: list[str]) -> str:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            rx, ry = json.loads(x), json.loads(y)
            return f"line {i + 2}: " + "; ".join(
                f"{k}: {rx[k]!r:.200} != {ry.get(k)!r:.200}" for k in rx if rx[k] != ry.get(k)
            )
    return f"{len(a)} lines != {len(b)} lines"


def _body(path: Path) -> list[str]:
    """The file's lines but its header (export time and source differ by construction)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return f.read().splitlines()[1:]


@pytest.mark.postgres
def test_sqlite_to_file_to_postgres_to_file_is_the_same_file_and_the_same_memory(tmp_path: Path, pg_url: str) -> None:
    src = tmp_path / "src.db"
    before = _build(src)
    first = tmp_path / "a.jsonl.gz"
    rep = export_to(str(src), first, None, vectors=True, graph=True)
    assert set(rep.namespaces) == {"default", "acme"} and rep.namespaces["default"]["graph_records"] > 10
    header = json.loads(gzip.open(first, "rt").readline())
    assert header["format"] == FORMAT and header["embedder"]["name"].startswith("hash")
    imp = import_into(first, pg_url)
    assert imp.vectors_reused and imp.namespaces["default"]["queued"] == 0
    with Memory(pg_url, embedder="hash") as m:
        assert _memory_state(m) == before["state"]  # history, current hits, as_of, a message's context
        assert {q: _search_ids(m, q) for q in QUERIES} == before["hits"]
        assert m.search("billing-service", mode="graph", top_k=5).results
        assert [r.chunk_id for r in m.search("HEL-4040", namespace="acme").results] == ["a1_p1"]
    second = tmp_path / "b.jsonl"
    export_to(pg_url, second, None, vectors=True, graph=True)
    assert _body(second) == _body(first), _first_difference(_body(first), _body(second))
    again = import_into(first, pg_url)  # idempotent: nothing written twice
    assert all(c.get("written", 0) == 0 for c in again.namespaces.values())
    assert again.notes and "already has a graph" in again.notes[0]
    export_to(pg_url, second, None, vectors=True, graph=True)
    assert _body(second) == _body(first), _first_difference(_body(first), _body(second))


def _export(tmp_path: Path, docs: list[dict], name: str = "e.jsonl") -> Path:
    db = tmp_path / f"{name}.db"
    with Memory(db, embedder="hash") as m:
        m.add_documents(docs)
        m.embed_pending()
    out = tmp_path / name
    export_to(str(db), out, None, vectors=True)
    return out


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def _write(path: Path, recs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def _ids(db: Path) -> set[str]:
    with Memory(db, embedder="hash") as m:
        return {d["doc_id"] for d in m.list(limit=1000).memories} if m.stats().documents else set()


def test_a_conflict_refuses_the_whole_file_unless_told_to_skip_or_replace(tmp_path: Path) -> None:
    f = _export(tmp_path, [{"id": "a", "text": "alpha one"}, {"id": "b", "text": "beta two"}])
    dst = tmp_path / "dst.db"
    with Memory(dst, embedder="hash") as m:
        m.add("beta, as the destination holds it", id="b")
    with pytest.raises(StoreError, match=r"1 document\(s\) the store holds with other content: default/b"):
        import_into(f, str(dst))
    assert _ids(dst) == {"b"}  # nothing written: not even "a"
    rep = import_into(f, str(dst), on_conflict="skip")
    assert rep.namespaces["default"]["written"] == 1 and rep.namespaces["default"]["conflicts"] == 1
    with Memory(dst, embedder="hash") as m:
        assert m.get("b")["chunks"][0]["text"].startswith("beta, as the destination")
    rep = import_into(f, str(dst), on_conflict="replace")
    assert rep.namespaces["default"]["replaced"] == 1 and rep.namespaces["default"]["unchanged"] == 1
    with Memory(dst, embedder="hash") as m:
        assert m.get("b")["chunks"][0]["text"] == "beta two"


def test_files_it_cannot_read_are_refused_before_any_write(tmp_path: Path) -> None:
    f = _export(tmp_path, [{"id": f"d{i}", "text": f"document number {i}"} for i in range(5)])
    recs = _lines(f)
    dst = tmp_path / "dst.db"
    cases = {
        "version": ([{**recs[0], "format_version": 2}, *recs[1:]], "format_version 2: this hybridmem reads version 1"),
        "cut": (recs[:-2], "ends without its end record"),
        "json": (None, "line 3: not JSON"),
        "dim": (
            [*recs[:2], {**recs[2], "chunks": [{**recs[2]["chunks"][0], "vector": [0.5] * 3}]}, *recs[3:]],
            "line 3: chunks[0].vector: 3 values",
        ),
        "nan": (
            [*recs[:2], {**recs[2], "chunks": [{**recs[2]["chunks"][0], "vector": [float("nan")] * 256}]}, *recs[3:]],
            "finite",
        ),
        "kind": ([*recs[:2], {"kind": "table"}, *recs[2:]], "unknown record kind 'table'"),
        "id": ([*recs[:2], {**recs[2], "id": "x@@v1"}, *recs[3:]], "past version's id"),
        "count": ([*recs[:2], *recs[3:]], "the end record counts 5 documents"),
    }
    for name, (bad, message) in cases.items():
        path = tmp_path / f"{name}.jsonl"
        if bad is None:
            lines = f.read_text().splitlines()
            lines[2] = lines[2][:-5]
            path.write_text("\n".join(lines) + "\n")
        else:
            path.write_text("".join(json.dumps(r, allow_nan=True) + "\n" for r in bad))
        with pytest.raises(ValidationError, match=re.escape(message)):
            import_into(path, str(dst))
        assert _ids(dst) == set(), name


def test_vectors_of_another_embedder_are_refused_or_left_out_with_reembed(tmp_path: Path) -> None:
    f = _export(tmp_path, [{"id": "a", "text": "alpha one"}])
    dst = tmp_path / "dst.db"
    with Memory(dst, embedder="hash:64") as m:  # another dimension
        m.add("held", id="held")
        m.embed_pending()
    with pytest.raises(StoreError, match=r"the file's vectors are of hash.*import with --reembed"):
        import_into(f, str(dst))
    rep = import_into(f, str(dst), reembed=True)
    assert not rep.vectors_reused and rep.namespaces["default"]["queued"] == 1
    with Memory(dst, embedder="hash:64", auto_embed=False) as m:  # no worker racing the count
        assert m.stats().pending_vectors == 1
        m.embed_pending()
        assert [r.chunk_id for r in m.search("alpha", mode="vector", top_k=1).results] == ["a_p1"]


def test_a_hand_written_file_with_only_ids_and_texts_imports_and_is_searchable(tmp_path: Path) -> None:
    f = _write(
        tmp_path / "mine.jsonl",
        [
            {"kind": "header", "format": FORMAT, "format_version": 1},
            {"kind": "document", "namespace": "notes", "id": "n1", "chunks": [{"text": "Le disque est plein"}]},
            {"kind": "document", "namespace": "notes", "id": "n2", "chunks": [{"text": "数据库连接超时"}]},
            {"kind": "end", "namespaces": {"notes": {"documents": 2, "chunks": 2}}},
        ],
    )
    dst = tmp_path / "dst.db"
    rep = import_into(f, str(dst))
    assert rep.namespaces["notes"]["written"] == 2 and rep.namespaces["notes"]["queued"] == 2
    with Memory(dst, embedder="hash", namespace="notes") as m:
        assert [r.chunk_id for r in m.search("disque plein", mode="bm25").results] == ["n1_p1"]
        assert [r.chunk_id for r in m.search("连接超时", mode="bm25").results] == ["n2_p1"]


def test_cli_export_import_round_trip(tmp_path: Path) -> None:
    src = tmp_path / "src.db"
    with Memory(src, embedder="hash") as m:
        m.add("ops note about HEL-4040", id="o1", namespace="ops")
        m.add("default note", id="d1")
        m.embed_pending()
    out = tmp_path / "ops.jsonl"
    r = CliRunner().invoke(app, ["--db", str(src), "export", "-n", "ops", "--with-vectors", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert [x["id"] for x in _lines(out) if x["kind"] == "document"] == ["o1"]
    dst = tmp_path / "dst.db"
    r = CliRunner().invoke(app, ["--db", str(dst), "import", str(out), "--json"])
    assert r.exit_code == 0, r.output
    body = json.loads(r.output[r.output.index("{") :])
    assert body["namespaces"]["ops"]["written"] == 1 and body["vectors_reused"]
    r = CliRunner().invoke(app, ["--db", str(dst), "import", str(out), "--on-conflict", "sometimes"])
    assert r.exit_code == 2 and "on_conflict" in r.output
    r = CliRunner().invoke(app, ["--db", str(src), "export", "-n", "nope"])
    assert r.exit_code != 0 and "no namespace 'nope'" in r.output
