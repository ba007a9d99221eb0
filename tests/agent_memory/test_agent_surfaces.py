"""Agent memory on every surface (docs/agent-memory.md): chat messages, scopes, times, versions and
soft deletes over HTTP (a real uvicorn server on loopback), the CLI (a subprocess) and MCP (the
official client over stdio, and over streamable HTTP with API keys); and the README's example
with the default e5 model."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hybridmem import Memory
from hybridmem.server.config import ServerConfig
from server_utils import LiveServer, assert_error

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "chat.jsonl"
QUESTION = "what did we decide about the billing pool last week"

KEY_A = "key-agent-team-a-01"  # team-a only
KEY_B = "key-agent-team-b-01"  # team-b only
KEYS = {KEY_A: ("team-a",), KEY_B: ("team-b",)}


def _msg(name: str | None, content: str, at: str) -> dict[str, Any]:
    role = {"role": "user", "name": name} if name else {"role": "assistant"}
    return {**role, "content": content, "timestamp": f"2026-03-03T{at}:00Z"}


#: the decision is the last turn: a message is indexed with the one before it (index-only context),
#: so a reply after it would share its words
CHAT = [
    _msg("Priya", "The billing pool ran out of connections.", "09:30"),
    _msg("Marco", "The reconciliation job holds 60 of them.", "09:32"),
    _msg(None, "Two options: raise max_connections, or give batch jobs their own pool.", "09:35"),
    _msg("Priya", "We decided to split the billing pool in two.", "09:41"),
]


# ---------------------------------------------------------------------------------------------- HTTP


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    m = Memory(tmp_path_factory.mktemp("agent-http") / "m.db", embedder="hash", auto_embed=True)
    yield m
    m.close()


@pytest.fixture(scope="module")
def srv(mem: Memory) -> Iterator[LiveServer]:
    with LiveServer(mem, ServerConfig(api_keys=KEYS, max_batch=10, max_body_bytes=64_000)) as s:
        with s.client(KEY_A) as c:
            r = c.post("/v1/messages", json={"session_id": "s1", "user_id": "u1", "messages": CHAT})
            assert r.status_code == 200, r.text
        mem.wait_for_vectors()
        yield s


@pytest.fixture()
def a(srv: LiveServer) -> Iterator[httpx.Client]:
    with srv.client(KEY_A) as c:
        yield c


@pytest.fixture()
def b(srv: LiveServer) -> Iterator[httpx.Client]:
    with srv.client(KEY_B) as c:
        yield c


def _query(c: httpx.Client, **body: Any) -> dict[str, Any]:
    r = c.post("/v1/query", json={"search_text": "billing pool", **body})
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_messages_become_turns_that_results_carry(a: httpx.Client) -> None:
    body = _query(a, session_id="s1", search_text="decided split billing pool", mode="bm25")
    top = body["results"][0]
    assert top["doc_id"] == "s1:3" and top["text"] == "Priya: We decided to split the billing pool in two."
    assert (top["session_id"], top["turn"], top["speaker"], top["role"]) == ("s1", 3, "Priya", "user")
    assert top["occurred_at"] == "2026-03-03T09:41:00.000Z" and top["recorded_at"] and top["valid_to"] is None
    assert top["metadata"]["user_id"] == "u1" and body["namespace"] == "team-a"
    # neighbouring turns, in turn order, the hit included
    body = _query(
        a, session_id="s1", search_text="decided split", mode="bm25", context_window={"before": 1, "after": 1}
    )
    assert [t["turn"] for t in body["results"][0]["context"]] == [2, 3]  # the last turn: none after it
    # scopes and times narrow every leg
    assert _query(a, user_id="u1")["total_retrieved"] >= 1
    late = _query(a, session_id=["s1"], time_range={"from": "2026-03-03T09:40:00Z"}, mode="bm25")
    assert [r["turn"] for r in late["results"]] == [3]


def test_a_second_batch_continues_the_session(a: httpx.Client) -> None:
    msgs = [{"role": "user", "name": "Sam", "content": "The pool alert is live.", "timestamp": "2026-03-04T08:00:00Z"}]
    r = a.post("/v1/messages", json={"session_id": "s-continued", "messages": msgs})
    assert r.status_code == 200 and r.json()["added"] == ["s-continued:0"], r.text
    r = a.post("/v1/messages", json={"session_id": "s-continued", "messages": msgs, "agent_id": "bot"})
    body = r.json()
    assert body["added"] == ["s-continued:1"] and body["session_id"] == "s-continued" and body["namespace"] == "team-a"
    assert a.get("/v1/memories/s-continued:1").json()["metadata"]["agent_id"] == "bot"


MSG = {"role": "user", "content": "fine"}


@pytest.mark.parametrize(
    "body,field",
    [
        ({"messages": [MSG, {"role": "user"}]}, "messages.1.content"),
        ({"messages": [{"role": 7, "content": "x"}]}, "messages.0.role"),
        ({"messages": [MSG, {"role": "user", "content": "x", "timestamp": "last tuesday"}]}, "messages.1.timestamp"),
        ({"messages": [{"role": "user", "content": "   "}]}, "messages.0.content"),
        ({"messages": [{"role": "user", "content": "x", "colour": "red"}]}, "messages.0.colour"),
        ({"messages": [MSG, {"role": "user", "content": "x", "metadata": {"turn": 9}}]}, "messages.1.metadata"),
        ({"messages": []}, "messages"),
        ({"messages": [MSG] * 11}, "messages"),  # max_batch 10
        ({"messages": [MSG], "session_id": ""}, "session_id"),
        ({"messages": [MSG], "session_id": 5}, "session_id"),
        ({"messages": [MSG], "user_id": ""}, "user_id"),
        ({"messages": [MSG], "session_id": None}, "session_id"),
    ],
)
def test_bad_messages_are_422_naming_the_field_and_write_nothing(
    a: httpx.Client, body: dict[str, Any], field: str
) -> None:
    before = a.get("/v1/stats").json()["documents"]
    r = a.post("/v1/messages", json={"session_id": "s-bad", **body})
    assert_error(r, 422, "validation_error", field)
    assert a.get("/v1/stats").json()["documents"] == before
    assert_error(a.get("/v1/memories/s-bad:0"), 404)


def test_messages_without_a_session_or_body(a: httpx.Client) -> None:
    assert_error(a.post("/v1/messages", json={"messages": [MSG]}), 422, field="session_id")
    assert_error(a.post("/v1/messages", content=b"[1, 2"), 422)


@pytest.mark.parametrize(
    "extra,field",
    [
        ({"time_range": {"from": "not a time"}}, "time_range"),
        ({"time_range": {"from": "2026-03-05", "to": "2026-03-01"}}, "time_range"),
        ({"time_range": {}}, "time_range"),
        ({"time_range": {"since": "2026-03-01"}}, "time_range.since"),
        ({"as_of": "2999-01-01"}, "as_of"),
        ({"as_of": "yesterday"}, "as_of"),
        ({"now": "soon"}, "now"),
        ({"session_id": "no-such-session"}, "session_id"),
        ({"session_id": ""}, "session_id"),
        ({"session_id": []}, "session_id"),
        ({"user_id": "nobody"}, "user_id"),
        ({"include_superseded": "yes"}, "include_superseded"),
        ({"context_window": {"before": 99}}, "context_window.before"),
        ({"context_window": {"before": "1"}}, "context_window.before"),
    ],
)
def test_bad_agent_query_fields_are_422_naming_the_field(a: httpx.Client, extra: dict[str, Any], field: str) -> None:
    assert_error(a.post("/v1/query", json={"search_text": "billing pool", **extra}), 422, field=field)
    # a question takes the same fields, checked the same way
    assert_error(a.post("/v1/answer", json={"question": "billing pool?", **extra}), 422, field=field)


def test_an_answer_is_scoped_and_reads_the_turns_around_its_hits(a: httpx.Client) -> None:
    body = {"question": "what did we decide about the billing pool", "rerank": False, "top_k": 1}
    r = a.post("/v1/answer", json={**body, "session_id": "s1", "context_window": {"before": 1, "after": 0}})
    assert r.status_code == 200, r.text
    hit = r.json()["results"][0]
    assert hit["session_id"] == "s1" and [t["turn"] for t in hit["context"]] == [hit["turn"] - 1, hit["turn"]]
    r = a.post("/v1/answer", json={**body, "time_range": {"to": "2026-03-03T09:31:00Z"}})
    assert r.status_code == 200, r.text
    assert [x["turn"] for x in r.json()["results"]] == [0]  # only the turn said before 09:31


def test_history_supersede_and_forget(a: httpx.Client) -> None:
    msgs = [{"role": "user", "name": "Ann", "content": "Our quokka cluster runs 3 nodes.", "timestamp": "2026-02-01"}]
    assert a.post("/v1/messages", json={"session_id": "s-ver", "messages": msgs}).status_code == 200
    h = a.get("/v1/memories/s-ver:0/history").json()
    assert h["id"] == "s-ver:0" and h["namespace"] == "team-a" and len(h["versions"]) == 1
    assert h["versions"][0]["current"] is True and h["versions"][0]["occurred_at"] == "2026-02-01T00:00:00.000Z"
    time.sleep(0.02)
    between = time.time()
    time.sleep(0.02)
    new = {"role": "user", "name": "Ann", "content": "Our quokka cluster runs 5 nodes.", "timestamp": "2026-02-08"}
    r = a.post("/v1/memories/s-ver:0/supersede", json={"message": new, "reason": "scaled up"})
    assert r.status_code == 200 and r.json()["updated"] == ["s-ver:0"], r.text
    h = a.get("/v1/memories/s-ver:0/history").json()["versions"]
    assert [v["version"] for v in h] == [1, 2] and [v["current"] for v in h] == [False, True]
    assert h[0]["valid_to"] and h[1]["reason"] == "scaled up" and h[1]["metadata"]["turn"] == 0
    assert h[1]["text"] == "Ann: Our quokka cluster runs 5 nodes."
    # searches see the current version; include_superseded and as_of see the old one
    now_ = _query(a, search_text="quokka cluster nodes", mode="bm25")["results"]
    assert [x["text"] for x in now_] == ["Ann: Our quokka cluster runs 5 nodes."] and now_[0]["version"] == 2
    both = _query(a, search_text="quokka cluster nodes", mode="bm25", include_superseded=True)["results"]
    assert len(both) == 2 and sum(1 for x in both if x["valid_to"]) == 1
    old = _query(a, search_text="quokka cluster nodes", mode="bm25", as_of=between)["results"]
    assert [x["text"] for x in old] == ["Ann: Our quokka cluster runs 3 nodes."]
    # a text supersession
    r = a.post("/v1/memories/s-ver:0/supersede", json={"text": "Ann: Our quokka cluster runs 7 nodes."})
    assert r.status_code == 200 and len(a.get("/v1/memories/s-ver:0/history").json()["versions"]) == 3
    # forget: a soft delete, kept in the history; the body may be left out
    r = a.post("/v1/memories/s-ver:0/forget", json={"reason": "cluster retired"})
    assert r.status_code == 200, r.text
    assert r.json()["id"] == "s-ver:0" and r.json()["valid_to"] and r.json()["namespace"] == "team-a"
    assert _query(a, search_text="quokka cluster nodes", mode="bm25")["results"] == []
    last = a.get("/v1/memories/s-ver:0/history").json()["versions"][-1]
    assert last["reason"] == "cluster retired" and last["current"] is False and last["valid_to"]
    assert_error(a.post("/v1/memories/s-ver:0/forget"), 404)  # no current version left
    assert_error(a.post("/v1/memories/s-ver:0/supersede", json={"text": "back"}), 404)


def test_history_supersede_forget_errors(a: httpx.Client) -> None:
    assert_error(a.get("/v1/memories/no-such/history"), 404, "not_found")
    assert_error(a.post("/v1/memories/no-such/supersede", json={"text": "x"}), 404, "not_found")
    assert_error(a.post("/v1/memories/no-such/forget"), 404, "not_found")
    assert_error(a.post("/v1/memories/s1:0/supersede", json={}), 422, field="text")
    both = {"text": "x", "message": {"role": "user", "content": "y"}}
    assert_error(a.post("/v1/memories/s1:0/supersede", json=both), 422, field="text")
    bad = {"message": {"role": "user"}}
    assert_error(a.post("/v1/memories/s1:0/supersede", json=bad), 422, field="message.content")
    reserved = {"message": {"role": "user", "content": "y", "metadata": {"session_id": "elsewhere"}}}
    assert_error(a.post("/v1/memories/s1:0/supersede", json=reserved), 422, field="message.metadata")
    assert_error(a.post("/v1/memories/s1:0/forget", json={"reason": ""}), 422, field="reason")
    assert_error(a.post("/v1/memories/s1:0/forget", json={"why": "x"}), 422, field="why")
    assert a.get("/v1/memories/s1:0/history").json()["versions"][-1]["current"] is True  # untouched


def test_ids_with_slashes_have_a_history(a: httpx.Client) -> None:
    r = a.post("/v1/memories", json={"memories": [{"id": "notes/db/pool", "text": "The pool is 80 connections."}]})
    assert r.status_code == 200
    assert a.put("/v1/memories/notes/db/pool", json={"text": "The pool is 60 + 20 connections."}).status_code == 200
    h = a.get("/v1/memories/notes/db/pool/history").json()
    assert h["id"] == "notes/db/pool" and [v["version"] for v in h["versions"]] == [1, 2]
    doc = a.get("/v1/memories/notes/db/pool").json()  # the plain GET still answers
    assert doc["doc_id"] == "notes/db/pool" and doc["version"] == 2 and doc["occurred_at"]


def test_a_key_cannot_reach_another_namespaces_messages_or_history(srv: LiveServer, a: httpx.Client) -> None:
    secret = [{"role": "user", "content": "The vault passphrase is wombat-42."}]
    assert a.post("/v1/messages", json={"session_id": "s-secret", "messages": secret}).status_code == 200
    with srv.client(KEY_B) as b:
        ns_a = {"namespace": "team-a"}
        assert_error(b.post("/v1/messages", json={"session_id": "s-secret", "messages": [MSG], **ns_a}), 403)
        assert_error(b.get("/v1/memories/s-secret:0/history", params=ns_a), 403, field="namespace")
        assert_error(b.post("/v1/memories/s-secret:0/supersede", params=ns_a, json={"text": "x"}), 403)
        assert_error(b.post("/v1/memories/s-secret:0/forget", params=ns_a), 403)
        assert_error(b.post("/v1/query", json={"search_text": "vault", **ns_a}), 403)
        # in its own namespace, B finds none of it (and its own session is its own)
        assert_error(b.get("/v1/memories/s-secret:0/history"), 404)
        assert_error(b.post("/v1/memories/s-secret:0/forget"), 404)
        assert_error(
            b.post("/v1/query", json={"search_text": "vault", "session_id": "s-secret"}), 422, field="session_id"
        )
        r = b.post("/v1/messages", json={"session_id": "s-secret", "messages": [MSG]})
        assert r.status_code == 200 and r.json()["added"] == ["s-secret:0"] and r.json()["namespace"] == "team-b"
    h = a.get("/v1/memories/s-secret:0/history").json()["versions"]
    assert len(h) == 1 and h[0]["current"] and "wombat-42" in h[0]["text"]  # A's memory untouched
    with srv.client() as anon:
        assert_error(anon.post("/v1/messages", json={"session_id": "x", "messages": [MSG]}), 401)
        assert_error(anon.get("/v1/memories/s1:0/history"), 401)
        assert_error(anon.post("/v1/memories/s1:0/forget"), 401)


def test_openapi_lists_the_agent_routes(srv: LiveServer) -> None:
    paths = httpx.get(srv.url + "/openapi.json", timeout=10).json()["paths"]
    assert {"/v1/messages", "/v1/memories/{doc_id}/history", "/v1/memories/{doc_id}/supersede"} <= set(paths)
    assert "post" in paths["/v1/memories/{doc_id}/forget"]


# ---------------------------------------------------------------------------------------------- CLI


def cli(
    db: Path, *args: str, stdin: str | None = None, cwd: Path | None = None, **env: str
) -> subprocess.CompletedProcess:
    """``hybridmem --db DB --embedder hash ARGS`` with stdout a pipe (plain lines, 80 columns)."""
    base = {
        k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR") and not k.startswith("HYBRIDMEM_")
    }
    cmd = [sys.executable, "-m", "hybridmem.cli", "--db", str(db), "--embedder", "hash", *args]
    return subprocess.run(
        cmd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**base, "TTY_COMPATIBLE": "0", **env},
    )


def _ok(r: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    return r


def _fails(r: subprocess.CompletedProcess, code: int, *needles: str) -> None:
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    line = r.stderr.strip()
    assert line.startswith("error:") and "\n" not in line and "Traceback" not in line, r.stderr
    for n in needles:
        assert n in line, (n, line)


@pytest.fixture(scope="module")
def chat_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("agent-cli") / "m.db"
    r = _ok(cli(db, "ingest", str(EXAMPLE), "--format", "chat", "--session", "s1", "--user", "u1", "--wait"))
    assert "session s1: 12 messages" in r.stdout and "turns 0-11" in r.stdout
    assert "12 added, 0 updated, 0 unchanged, 0 skipped; 12 chunks written" in r.stdout
    return db


def test_cli_search_shows_who_said_what_when(chat_db: Path) -> None:
    r = _ok(cli(chat_db, "search", "decided split billing pool", "--mode", "bm25", "--session", "s1", "--context", "1"))
    lines = r.stdout.splitlines()
    assert lines[0].split()[2] == "s1:3_p1" and "session s1" not in lines[0]  # the conversation line says it
    assert lines[1] == "    session s1 · turn 3 · Priya · 2026-03-03 09:41Z"
    assert lines[2].startswith("    Priya: OK, we decided: split the billing pool")
    assert lines[3].startswith("        turn 2 · 2026-03-03 09:35Z  Sam: Raising max_connections")
    assert lines[4].startswith("        turn 4 · 2026-03-03 09:42Z  assistant: Noted.")
    assert all(len(line) <= 80 for line in lines[:-1])
    got = json.loads(_ok(cli(chat_db, "search", "billing pool", "--session", "s1", "--json", "-k", "12")).stdout)
    assert got["results"] and all(x["session_id"] == "s1" for x in got["results"])
    assert all(isinstance(x["turn"], int) and x["speaker"] and x["occurred_at"] for x in got["results"])
    assert all(x["metadata"]["user_id"] == "u1" for x in got["results"])


def test_cli_scope_and_time_options(chat_db: Path) -> None:
    def turns(*args: str) -> list[int]:
        out = _ok(cli(chat_db, "search", "billing pool connections", "--mode", "bm25", "-k", "12", "--json", *args))
        return sorted(x["turn"] for x in json.loads(out.stdout)["results"])

    assert set(turns("--since", "2026-03-10")) <= set(range(6, 12)) and turns("--since", "2026-03-10")
    assert set(turns("--until", "2026-03-04")) <= set(range(6)) and turns("--until", "2026-03-04")
    assert turns("--since", "2026-03-03T09:40:00Z", "--until", "2026-03-03T09:43:00Z") == [3, 4]
    assert turns("--user", "u1", "--session", "s1", "--session", "s1") == turns()
    assert turns("--as-of", "2020-01-01") == []  # nothing was recorded yet then
    r = _ok(cli(chat_db, "search", QUESTION, "--now", "2026-03-12", "--json", "--local"))
    assert json.loads(r.stdout)["legs"]["time"]["status"] == "ok"  # "last week" of --now
    _fails(cli(chat_db, "search", "pool", "--session", "nope"), 2, "session_id", "no memory")
    _fails(cli(chat_db, "search", "pool", "--user", "nobody"), 2, "user_id")
    _fails(cli(chat_db, "search", "pool", "--since", "someday"), 2, "time_range", "someday")
    _fails(cli(chat_db, "search", "pool", "--since", "2026-03-05", "--until", "2026-03-01"), 2, "time_range")
    _fails(cli(chat_db, "search", "pool", "--as-of", "2999-01-01"), 2, "as_of")
    _fails(cli(chat_db, "search", "pool", "--context", "99"), 2, "context_window")


def test_cli_history_and_superseded_versions(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    _ok(cli(db, "ingest", "-", "--format", "chat", "--session", "s9", stdin=json.dumps(CHAT)))
    with Memory(db, embedder="hash", auto_embed=False) as m:
        m.supersede("s9:3", {"role": "user", "name": "Priya", "content": "We decided to merge the billing pools."})
    r = _ok(cli(db, "history", "s9:3"))
    lines = r.stdout.splitlines()
    assert re.match(r"v1  s9:3@@v1  superseded  occurred 2026-03-03 09:41Z  recorded \S+ \S+  valid to ", lines[0])
    assert lines[1] == "    Priya: We decided to split the billing pool in two."
    assert lines[2].startswith("v2  s9:3  current  occurred ") and lines[2].endswith("(superseded)")
    h = json.loads(_ok(cli(db, "history", "s9:3", "--json")).stdout)
    assert h["id"] == "s9:3" and h["namespace"] == "default" and [v["version"] for v in h["versions"]] == [1, 2]
    _fails(cli(db, "history", "s9:99"), 3, "s9:99")
    _fails(cli(tmp_path / "none.db", "history", "x"), 3)
    now_ = json.loads(_ok(cli(db, "search", "merge", "--mode", "bm25", "--json")).stdout)["results"]
    assert [(x["doc_id"], x["version"], x["valid_to"]) for x in now_] == [("s9:3", 2, None)]
    r = _ok(cli(db, "search", "billing pool", "--mode", "bm25", "--include-superseded"))
    assert "· superseded 20" in r.stdout and "split the billing pool" in r.stdout


def test_cli_chat_file_shapes(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    arr = tmp_path / "a.json"
    arr.write_text(json.dumps(CHAT[:2]))
    obj = tmp_path / "b.json"
    obj.write_text(json.dumps({"session_id": "from-file", "user_id": "u7", "messages": CHAT[2:]}))
    r = _ok(cli(db, "ingest", str(arr), str(obj), "--format", "chat", "--session", "s-arr", "--json"))
    assert json.loads(r.stdout)["added"] == ["s-arr:0", "s-arr:1", "s-arr:2", "s-arr:3"]  # --session wins
    r = _ok(cli(db, "ingest", str(obj), "--format", "chat", "--meta", "team=billing"))  # the file's own session
    assert "session from-file: 2 messages" in r.stdout and "2 added" in r.stdout
    doc = json.loads(_ok(cli(db, "get", "from-file:1")).stdout)
    assert doc["metadata"]["user_id"] == "u7" and doc["metadata"]["team"] == "billing"
    r = _ok(cli(db, "ingest", str(obj), "--format", "chat"))  # appended: the report says so
    assert "as turns 2-3 (it already held turns 0-1" in r.stdout
    r = _ok(cli(db, "ingest", "-", "--format", "chat", "--session", "s-stdin", stdin="\n".join(map(json.dumps, CHAT))))
    assert "4 added" in r.stdout


@pytest.mark.parametrize(
    "content,args,code,needles",
    [
        ('{"role": "user", "content": "ok"}\n{"role": "user"\n', [], 2, ["line 2", "not valid JSON"]),
        ('{"role": "user", "content": "ok"}\n\n{"role": "user"}\n', [], 2, ["line 3, content", "Field required"]),
        ('{"role": 3, "content": "ok"}\n', [], 2, ["line 1, role"]),
        ('{"role": "user", "content": "ok", "timestamp": "noon-ish"}\n', [], 2, ["line 1, timestamp", "noon-ish"]),
        ('{"role": "user", "content": "ok", "metadata": {"turn": 4}}\n', [], 2, ["line 1, metadata", "turn"]),
        ('{"role": "user", "content": "ok"}\n', ["--meta", "speaker=x"], 2, ["--meta", "speaker"]),
        ("\n\n", [], 2, ["no messages"]),
        ('{"role": "user", "content": "ok"}\n', ["--id", "x"], 2, ["--id", "--format chat"]),
        ('{"role": "user", "content": "ok"}\n', ["--format", "csv"], 2, ["--format", "csv"]),
    ],
)
def test_cli_bad_chat_files_are_one_line_errors_and_write_nothing(
    tmp_path: Path, content: str, args: list[str], code: int, needles: list[str]
) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps(CHAT[0]) + "\n")
    bad = tmp_path / "chat.jsonl"
    bad.write_text(content)
    cmd = ["ingest", str(good), str(bad), "--format", "chat", "--session", "s1", *args]
    if "--format" in args:
        cmd.remove("chat")
        cmd.remove("--format")
    _fails(cli(tmp_path / "m.db", *cmd), code, *needles)
    assert not (tmp_path / "m.db").exists()  # checked before the store was even opened


def test_cli_chat_needs_a_session(tmp_path: Path) -> None:
    arr = tmp_path / "a.json"
    arr.write_text(json.dumps(CHAT))
    _fails(cli(tmp_path / "m.db", "ingest", str(arr), "--format", "chat"), 2, "--session", "a.json")
    obj = tmp_path / "b.json"
    obj.write_text(json.dumps({"session": "typo", "messages": CHAT}))
    _fails(cli(tmp_path / "m.db", "ingest", str(obj), "--format", "chat", "--session", "s"), 2, "unknown key session")
    _fails(cli(tmp_path / "m.db", "ingest", str(arr), "--session", "s1"), 2, "--format chat")
    _fails(cli(tmp_path / "m.db", "ingest", str(tmp_path / "missing.jsonl"), "--format", "chat", "--session", "s"), 3)
    assert not (tmp_path / "m.db").exists()


def _serve(db: Path) -> tuple[subprocess.Popen, int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("HYBRIDMEM_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "hybridmem.cli", "--db", str(db), "--embedder", "hash", "serve", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 60
    while not db.with_name(db.name + ".serve.json").exists() or not _listening(port):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.1)
    return proc, port


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def test_cli_search_sends_the_agent_fields_to_a_running_server(chat_db: Path) -> None:
    proc, port = _serve(chat_db)
    try:
        r = _ok(cli(chat_db, "search", "decided split billing pool", "--session", "s1", "--context", "1", "--json"))
        assert f"query embedded by server at 127.0.0.1:{port}" in r.stderr
        top = json.loads(r.stdout)["results"][0]
        assert top["session_id"] == "s1" and [t["turn"] for t in top["context"]] == [
            top["turn"] - 1,
            top["turn"],
            top["turn"] + 1,
        ]
        r = _ok(cli(chat_db, "search", "billing pool", "--since", "2026-03-10", "--json", "-k", "12"))
        assert "query embedded by server" in r.stderr and min(x["turn"] for x in json.loads(r.stdout)["results"]) >= 6
        _fails(cli(chat_db, "search", "pool", "--session", "nope"), 2, "session_id")  # the server's 422, as here
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
        assert re.search(r'endpoint="/v1/query"[^}]*status="422"\} 1', metrics), metrics
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "Traceback" not in err


@pytest.mark.integration
def test_the_readme_agent_memory_example_with_the_default_model(tmp_path: Path) -> None:
    """The two commands of the README's "Agent memory" section, as written, with e5 (real weights)."""
    section = (REPO / "README.md").read_text().split("### Agent memory", 1)[1].split("\n#", 1)[0]
    commands = [line.split("#")[0].strip() for line in section.splitlines() if line.startswith("hybridmem ")]
    ingest, search = (shlex.split(c)[1:] for c in commands[:2])
    assert ingest[:4] == ["ingest", "examples/chat.jsonl", "--format", "chat"] and search[1] == QUESTION
    env = {k: v for k, v in os.environ.items() if k not in ("HYBRIDMEM_EMBEDDER", "HYBRIDMEM_DB")}
    base = [sys.executable, "-m", "hybridmem.cli", "--db", str(tmp_path / "mem.db")]

    def run(args: list[str]) -> subprocess.CompletedProcess:
        return _ok(subprocess.run(base + args, cwd=REPO, capture_output=True, text=True, timeout=600, env=env))

    assert "12 added" in run(ingest).stdout
    for vectors in (False, True):  # BM25 and the time leg while the vectors wait; then every leg
        if vectors:
            run(["embed"])
        r = run([*search, "--json", "--local"])
        assert "e5" in r.stderr  # the default model embedded the query
        top = json.loads(r.stdout)["results"][0]
        assert top["doc_id"] == "s1:3" and top["speaker"] == "Priya" and "we decided" in top["text"], top
        assert top["ranks"]["bm25"] == 1 and top["ranks"]["time"] == 1 and ("dense" in top["ranks"]) == vectors
    assert "we decided" in run(search).stdout.splitlines()[2]  # the plain output shows it first


# ---------------------------------------------------------------------------------------------- MCP


def _data(result: Any) -> dict:
    assert not result.is_error, result.content
    return dict(json.loads(result.content[0].text))


def _error(result: Any) -> str:
    assert result.is_error, result.content
    text = str(result.content[0].text)
    assert "\n" not in text and "Traceback" not in text, text
    return text


async def _agent_session(db: Path) -> None:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    args = ["-m", "hybridmem.cli", "--db", str(db), "--embedder", "hash", "mcp"]
    params = StdioServerParameters(command=sys.executable, args=args, env={"PYTHONUNBUFFERED": "1"})
    with open(os.devnull, "w") as devnull:
        async with stdio_client(params, errlog=devnull) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            tools = {t.name: t for t in (await s.list_tools()).tools}
            assert {"remember", "recall", "history", "forget"} <= set(tools)
            props = tools["recall"].input_schema["properties"]
            assert {"session_id", "user_id", "time_range", "as_of", "include_superseded", "context_window"} <= set(
                props
            )
            assert {"messages", "session_id", "user_id", "agent_id"} <= set(
                tools["remember"].input_schema["properties"]
            )
            await _agent_calls(s)


async def _agent_calls(s: Any) -> None:
    r = _data(await s.call_tool("remember", {"messages": CHAT, "session_id": "s1", "user_id": "u1"}))
    assert r["ids"] == ["s1:0", "s1:1", "s1:2", "s1:3"] and r["session_id"] == "s1" and r["added"] == r["ids"]
    r = _data(await s.call_tool("remember", {"text": "Priya prefers tea.", "id": "pref", "user_id": "u1"}))
    assert r["added"] == ["pref"]
    args = {"search_text": "decided split billing pool", "mode": "bm25", "session_id": "s1"}
    hits = _data(await s.call_tool("recall", {**args, "context_window": {"before": 1, "after": 0}}))["results"]
    top = hits[0]
    assert (top["doc_id"], top["session_id"], top["turn"], top["speaker"]) == ("s1:3", "s1", 3, "Priya")
    assert top["occurred_at"] == "2026-03-03T09:41:00.000Z" and [t["turn"] for t in top["context"]] == [2, 3]
    span = {"from": "2026-03-03T09:40:00Z", "to": "2026-03-03T09:42:00Z"}
    hits = _data(await s.call_tool("recall", {"search_text": "billing pool", "mode": "bm25", "time_range": span}))
    assert [x["doc_id"] for x in hits["results"]] == ["s1:3"]
    hits = _data(await s.call_tool("recall", {"search_text": "tea", "mode": "bm25", "user_id": "u1"}))["results"]
    assert hits[0]["doc_id"] == "pref"
    assert _data(await s.call_tool("recall", {"query": "tea", "mode": "bm25", "as_of": "2020-01-01"}))["results"] == []
    h = _data(await s.call_tool("history", {"id": "s1:3"}))
    assert h["id"] == "s1:3" and h["versions"][0]["current"] and h["versions"][0]["metadata"]["speaker"] == "Priya"
    assert _data(await s.call_tool("history", {"doc_id": "pref"}))["versions"][0]["text"] == "Priya prefers tea."
    # ask takes the same scopes and window as recall
    q = {"question": "what did we decide about the billing pool", "rerank": False, "top_k": 1, "session_id": "s1"}
    ans = _data(await s.call_tool("ask", {**q, "context_window": {"before": 1, "after": 0}}))
    assert ans["results"][0]["session_id"] == "s1" and len(ans["results"][0]["context"]) == 2
    assert "session_id" in _error(await s.call_tool("ask", {**q, "session_id": "nope"}))
    # errors: one line, naming the argument
    assert "session_id" in _error(await s.call_tool("remember", {"messages": CHAT}))
    assert "messages.0.content" in _error(
        await s.call_tool("remember", {"messages": [{"role": "user"}], "session_id": "s"})
    )
    assert "messages.0.metadata" in _error(
        await s.call_tool("remember", {"messages": [{**MSG, "metadata": {"turn": 1}}], "session_id": "s"})
    )
    assert "`text`" in _error(await s.call_tool("remember", {"user_id": "u1"}))
    assert "only with `text`" in _error(await s.call_tool("remember", {"messages": CHAT, "session_id": "s", "id": "x"}))
    assert "session_id" in _error(await s.call_tool("recall", {"search_text": "x", "session_id": "nope"}))
    assert "time_range" in _error(await s.call_tool("recall", {"search_text": "x", "time_range": {"from": "bad"}}))
    assert "as_of" in _error(await s.call_tool("recall", {"search_text": "x", "as_of": "2999-01-01"}))
    assert "context_window.before" in _error(
        await s.call_tool("recall", {"search_text": "x", "context_window": {"before": 99}})
    )
    assert "no memory 'nope'" in _error(await s.call_tool("history", {"id": "nope"}))
    assert "`id`" in _error(await s.call_tool("history", {}))
    assert _data(await s.call_tool("recall", {"search_text": "tea", "mode": "bm25"}))["results"]  # still serving


def test_mcp_agent_memory_tools_over_stdio(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    asyncio.run(asyncio.wait_for(_agent_session(db), timeout=120))
    with Memory(db, embedder="hash", auto_embed=False) as m:  # nothing a refused call tried was written
        assert m.stats().documents == 5 and [v["version"] for v in m.history("s1:3")] == [1]


MCP_KEY_A = "sk-mcp-agent-a-01"
MCP_KEY_B = "sk-mcp-agent-b-01"


async def _keyed(url: str, key: str, check: Any) -> None:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {key}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as client:
        async with streamable_http_client(url, http_client=client) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            await check(s)


async def _as_a(s: Any) -> None:
    r = _data(await s.call_tool("remember", {"messages": CHAT[:1], "session_id": "a-chat"}))
    assert r["namespace"] == "team-a" and r["ids"] == ["a-chat:0"]


async def _as_b(s: Any) -> None:
    ns_a = {"namespace": "team-a"}
    for tool, args in (
        ("remember", {"messages": [MSG], "session_id": "a-chat", **ns_a}),
        ("recall", {"search_text": "billing", "session_id": "a-chat", **ns_a}),
        ("history", {"id": "a-chat:0", **ns_a}),
    ):
        assert "may not use namespace 'team-a'" in _error(await s.call_tool(tool, args)), tool
    assert "no memory 'a-chat:0'" in _error(await s.call_tool("history", {"id": "a-chat:0"}))  # not in team-b
    assert "session_id" in _error(await s.call_tool("recall", {"search_text": "billing", "session_id": "a-chat"}))


def test_mcp_keys_keep_conversations_apart(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("HYBRIDMEM_")}
    env["HYBRIDMEM_API_KEYS"] = f"{MCP_KEY_A}:team-a;{MCP_KEY_B}:team-b"
    db = tmp_path / "m.db"
    args = ["--db", str(db), "--embedder", "hash", "mcp", "--transport", "http", "--port", str(port)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "hybridmem.cli", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 60
        while not _listening(port):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.2)
        asyncio.run(asyncio.wait_for(_keyed(url, MCP_KEY_A, _as_a), timeout=60))
        asyncio.run(asyncio.wait_for(_keyed(url, MCP_KEY_B, _as_b), timeout=60))
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    assert "Traceback" not in err
    with Memory(db, embedder="hash", auto_embed=False) as m:
        assert m.stats("team-a").documents == 1 and m.stats("team-b").documents == 0
