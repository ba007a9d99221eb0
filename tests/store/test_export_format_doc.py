"""docs/export-format.md's complete example is a file ``hybridmem import`` reads as the page says:
the past version and its reason, ``as_of``, the message's session and turn, vectors reused (a list
and base64), the graph, a second namespace; importing it twice writes nothing; the graph records
are checked before any write."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hybridmem import Memory
from hybridmem.errors import ValidationError
from hybridmem.transfer import import_into

DOC = Path(__file__).resolve().parents[2] / "docs" / "export-format.md"


def _example(tmp_path: Path) -> Path:
    blocks = re.findall(r"```jsonl\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 1, "the page has one jsonl example"
    path = tmp_path / "example.jsonl"
    path.write_text(blocks[0], encoding="utf-8")
    return path


def test_the_documented_example_imports_as_described(tmp_path: Path) -> None:
    f = _example(tmp_path)
    db = tmp_path / "dst.db"
    rep = import_into(f, str(db))
    assert rep.vectors_reused
    assert rep.namespaces["default"]["written"] == 3 and rep.namespaces["default"]["vectors"] == 2
    assert rep.namespaces["default"]["queued"] == 1 and rep.namespaces["default"]["graph_rows"] >= 3
    assert rep.namespaces["acme"]["written"] == 1 and rep.namespaces["acme"]["vectors"] == 1
    with Memory(db, embedder="hash:4", auto_embed=False) as m:
        hist = m.history("city")
        assert [v["text"] for v in hist] == ["The user lives in Lyon.", "The user lives in Berlin now."]
        assert hist[0]["valid_to"] is not None and hist[1]["reason"] == "moved"
        then = m.search("lives in which city", mode="bm25", as_of="2025-01-06T12:00:00Z")
        assert [r.text for r in then.results] == ["The user lives in Lyon."]
        now = m.search("lives in which city", mode="bm25")
        assert [r.text for r in now.results] == ["The user lives in Berlin now."]
        turn = m.search("Kafka lagging", mode="bm25", session_id="s1").results[0]
        assert (turn.doc_id, turn.session_id, turn.turn) == ("s1:0", "s1", 0)
        assert m.stats().vectors == 2 and m.stats().pending_vectors == 1
        assert m.search("berlin", mode="graph", top_k=1).results[0].chunk_id == "city_p1"
        acme = m.search("HEL-4040", namespace="acme").results
        assert [r.chunk_id for r in acme] == ["a1_p1"]
    again = import_into(f, str(db))
    assert all(c.get("written", 0) == 0 for c in again.namespaces.values())
    assert again.namespaces["default"]["unchanged"] == 3


def test_graph_records_are_checked_before_any_write(tmp_path: Path) -> None:
    lines = _example(tmp_path).read_text(encoding="utf-8").splitlines()
    recs = [json.loads(x) for x in lines]
    i = next(k for k, r in enumerate(recs) if r["kind"] == "graph_entity")
    relation = {"kind": "graph_relation", "namespace": "default", "src": "berlin", "dst": "lyon", "type": "t"}
    cases = {
        "field": ([*recs[:i], {k: v for k, v in recs[i].items() if k != "mentions"}, *recs[i + 1 :]], "mentions"),
        "pairs": ([*recs[:i], {**recs[i], "mentions": [["city_p1"]]}, *recs[i + 1 :]], "[chunk id, number] pairs"),
        "key": (
            [*recs[: i + 1], {**relation, "description": "", "sources": []}, *recs[i + 1 :]],
            "'lyon' is no graph_entity",
        ),
        "namespace": ([*recs[:1], {"kind": "namespace", "name": ""}, *recs[1:]], "invalid namespace"),
    }
    for name, (bad, message) in cases.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in bad), encoding="utf-8")
        db = tmp_path / f"{name}.db"
        with pytest.raises(ValidationError, match=re.escape(message)):
            import_into(path, str(db))
        with Memory(db, embedder="hash:4") as m:
            assert m.stats().documents == 0, name
