"""``hybridmem ingest --format chat --extract`` and ``hybridmem extract --pending`` (issue 46), as a
user runs them: the CLI in a process, the LLM an OpenAI-compatible server on the loopback."""

from __future__ import annotations

import json
from pathlib import Path

from test_agent_surfaces import _fails, _ok, cli
from test_extract import TURNS, _fact, _facts, _verdict

from llm_fakes import FakeLLMServer, Scripted


def test_ingest_extract_leaves_a_failed_batch_pending_and_extract_pending_runs_it(tmp_path: Path) -> None:
    db, chat = tmp_path / "c.db", tmp_path / "chat.json"
    chat.write_text(json.dumps({"session_id": "s1", "user_id": "u1", "messages": TURNS}))
    _fails(cli(db, "ingest", str(chat), "--format", "chat", "--extract"), 2, "--extract", "LLM")
    _fails(cli(db, "ingest", str(chat), "--extract"), 2, "--extract", "--format chat")
    assert not db.exists() or "s1:0" not in _ok(cli(db, "list", "--json")).stdout
    with FakeLLMServer() as server:
        env = {
            "HYBRIDMEM_LLM": "openai:test-model",
            "HYBRIDMEM_LLM_BASE_URL": f"{server.url}/v1",
            "OPENAI_API_KEY": "test-key",
        }
        server.script = [Scripted(text=_facts(_fact("Caroline moved to Lisbon.", ["s1:0"], key="caroline.city")))]
        server.script += [Scripted(text="not json"), Scripted(text="still not json")]  # the 2nd batch fails
        r = _ok(cli(db, "ingest", str(chat), "--format", "chat", "--extract", "--extract-batch", "2", **env))
        assert (
            "session s1: 4 messages" in r.stdout
            and "extraction (openai:test-model): 2 batch(es), 1 fact(s)" in r.stdout
        )
        assert "1 batch(es) pending" in r.stdout and "pending" in r.stderr and "invalid output" in r.stderr
        _fails(cli(db, "extract", **env), 2, "--pending")
        cat = _facts(_fact("Caroline adopted a cat named Luna.", ["s1:2"]))
        server.responder = lambda seen: cat if seen.schema_name == "ProposedFacts" else _verdict("ADD")
        got = json.loads(_ok(cli(db, "extract", "--pending", "--json", **env)).stdout)
        assert got["pending"] == 0 and [b["turns"] for b in got["batches"]] == [["s1:2", "s1:3"]]
        (fact,) = got["batches"][0]["facts"]
        assert fact["source_turns"] == ["s1:2"] and fact["event"] == "ADD"
        again = _ok(cli(db, "extract", "--pending", **env))
        assert "0 batch(es), 0 fact(s)" in again.stdout and "pending" not in again.stderr
        calls = [seen.schema_name for seen in server.requests]
        assert calls.count("ProposedFacts") == 4  # 1 + 2 (the failed one and its repair) + 1
    shown = json.loads(_ok(cli(db, "get", fact["id"])).stdout)
    assert shown["metadata"]["kind"] == "fact" and shown["metadata"]["source_turns"] == ["s1:2"]


def test_extract_session_reads_a_session_ingested_without_extract(tmp_path: Path) -> None:
    db, chat = tmp_path / "s.db", tmp_path / "chat.json"
    chat.write_text(json.dumps({"session_id": "s1", "user_id": "u1", "messages": TURNS}))
    _ok(cli(db, "ingest", str(chat), "--format", "chat"))
    with FakeLLMServer() as server:
        env = {"HYBRIDMEM_LLM": "openai:m", "HYBRIDMEM_LLM_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "k"}
        server.responder = lambda seen: _facts(_fact("Caroline moved to Lisbon.", ["s1:0"], key="caroline.city"))
        _fails(cli(db, "extract", "--pending", "--session", "s1", **env), 2, "--pending", "--session")
        _fails(cli(db, "extract", "--session", "nope", **env), 3, "nope")
        got = json.loads(_ok(cli(db, "extract", "--session", "s1", "--extract-batch", "4", "--json", **env)).stdout)
        ((fact,),) = [b["facts"] for b in got["batches"]]
        assert fact["source_turns"] == ["s1:0"] and fact["key"] == "caroline.city" and got["pending"] == 0
        again = _ok(cli(db, "extract", "--session", "s1", **env)).stdout  # the same fact again: held already
        assert "1 fact(s) (1 NONE)" in again
