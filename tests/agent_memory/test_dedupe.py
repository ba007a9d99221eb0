"""Near duplicates without a model (hybridmem.dedupe): remember(dedupe=True), Memory.dedupe, on
both backends; the HTTP field and its server default; the CLI command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hybridmem import Memory
from hybridmem.errors import ValidationError


def _none(m: Memory, text: str, **kw: object) -> str | None:
    d = m.remember(text, dedupe=True, **kw)  # type: ignore[arg-type]
    return d.id if d.event == "NONE" else None


def test_remember_dedupe_catches_equal_and_near_texts_of_the_scope_only(target: str | Path) -> None:
    with Memory(target, embedder="hash", auto_embed=False) as m:
        flight = m.remember("My flight is on May 3.", user_id="u1").id
        alps = m.remember("I really love hiking in the Alps every summer", user_id="u1").id
        fr = m.remember("J'habite à Montréal depuis deux ans", user_id="u1").id
        zh = m.remember("我喜欢在夏天去阿尔卑斯山徒步", user_id="u1").id
        d = m.remember("  MY flight is on may 3 ", user_id="u1", dedupe=True)
        assert (d.event, d.id, d.decided_by, d.candidates) == ("NONE", flight, "rule", [flight])
        assert "near duplicate of" in d.reason and d.report is None
        assert _none(m, "I love hiking in the Alps every summer!", user_id="u1") == alps  # near: overlap 0.83
        assert _none(m, "j'HABITE a montreal, depuis deux ans", user_id="u1") == fr  # accents, case, punctuation
        assert _none(m, "我喜欢在夏天去阿尔卑斯山徒步。", user_id="u1") == zh
        # the same words, another fact: a number, a negation, another scope, another namespace
        assert _none(m, "My flight is on May 5", user_id="u1") is None
        assert _none(m, "I do not love hiking in the Alps every summer", user_id="u1") is None
        # (an id of their own: an id derived from the text alone would name the same memory)
        assert _none(m, "My flight is on May 3.", user_id="u2", id="u2-flight") is None
        assert _none(m, "My flight is on May 3.", user_id="u1", agent_id="a1", id="a1-flight") is None
        assert _none(m, "My flight is on May 3.", user_id="u1", namespace="other") is None
        assert m.stats().documents == 4 + 4  # every NONE wrote nothing; the other namespace apart
        assert _none(m, "My flight is on May 3.", user_id="u1") == flight  # the very text: its own id, NONE
        # a memory given by id is updated, never held by its own older version
        assert (
            m.remember("I really love hiking in the Alps each summer", user_id="u1", id=alps, dedupe=True).event
            == "ADD"
        )
        assert [v["current"] for v in m.history(alps)] == [False, True]
        # a superseded version is not held any more: only the current text is
        assert _none(m, "I really love hiking in the Alps every summer", user_id="u1") is None
        m.forget(flight)  # a retired memory is not held any more
        assert m.remember("My flight is on May 3.", user_id="u1", dedupe=True).event == "ADD"
        with pytest.raises(ValidationError) as e:
            m.remember("x", dedupe="yes")  # type: ignore[arg-type]
        assert e.value.field == "dedupe"


def test_dedupe_groups_dry_run_writes_nothing_apply_keeps_the_newest_with_the_reason(target: str | Path) -> None:
    with Memory(target, embedder="hash", auto_embed=False) as m:
        a = m.remember("Alice prefers tea over coffee", user_id="u", id="a").id
        b = m.remember("alice prefers TEA over coffee!", user_id="u", id="b").id
        m.remember("Alice prefers tea over coffee", user_id="v", id="c")  # another scope
        m.remember("The build takes 12 minutes", user_id="u", id="d")
        m.remember("The build takes 15 minutes", user_id="u", id="e")  # another number
        dry = m.dedupe()
        assert (dry["groups"], dry["would_forget"], dry["applied"]) == (1, 1, False)
        (g,) = dry["duplicates"]
        assert g["keep"]["id"] == b and [x["id"] for x in g["drop"]] == [a]
        assert m.find_duplicates() == dry["duplicates"]
        assert [v["current"] for v in m.history(a)] == [True]  # dry run: nothing written
        done = m.dedupe(apply=True)
        assert (done["groups"], done["forgotten"]) == (1, 1)
        last = m.history(a)[-1]
        assert not last["current"] and last["reason"] == f"near duplicate of {b} (dedup)"
        assert m.dedupe()["groups"] == 0 and m.stats().documents >= 4


def test_http_remember_dedupe_field_and_server_default(tmp_path: Path) -> None:
    from hybridmem.server.config import ServerConfig, load_config
    from server_utils import LiveServer, assert_error

    assert load_config(env={"HYBRIDMEM_SERVER_REMEMBER_DEDUPE": "true"}).remember_dedupe is True
    with Memory(tmp_path / "h.db", embedder="hash", auto_embed=False) as m:
        with LiveServer(m) as s, s.client() as c:
            first = c.post("/v1/remember", json={"text": "The wifi password is hunter2", "user_id": "u"}).json()
            r = c.post("/v1/remember", json={"text": "the wifi password is: hunter2", "user_id": "u", "dedupe": True})
            assert r.status_code == 200 and (r.json()["event"], r.json()["id"]) == ("NONE", first["id"]), r.text
            r = c.post("/v1/remember", json={"text": "the wifi password is: hunter2", "user_id": "u"})
            assert r.json()["event"] == "ADD"  # the server's default: no dedupe
            assert_error(c.post("/v1/remember", json={"text": "x", "dedupe": "yes"}), 422, field="dedupe")
        with LiveServer(m, ServerConfig(remember_dedupe=True)) as s, s.client() as c:
            r = c.post("/v1/remember", json={"text": "The wifi password is hunter2!", "user_id": "u"})
            assert r.json()["event"] == "NONE"
            r = c.post("/v1/remember", json={"text": "The wifi password is hunter2!", "user_id": "u", "dedupe": False})
            assert r.json()["event"] == "ADD"


def test_cli_dedup_dry_run_then_apply(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with Memory(db, embedder="hash", auto_embed=False) as m:
        m.remember("Bob's dog is called Rex", user_id="u", id="old")
        time.sleep(0.01)  # recorded times are milliseconds: a tie would keep the larger id ("old")
        m.remember("bob's dog is called rex.", user_id="u", id="new")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "hybridmem.cli", "--db", str(db), "--embedder", "hash", "dedup", *args]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)

    dry = run()
    assert dry.returncode == 0 and "keep  new" in dry.stdout and "drop old" in dry.stdout, dry.stdout + dry.stderr
    assert "1 group(s), 1 memories would be forgotten" in dry.stdout
    done = json.loads(run("--apply", "--json").stdout)
    assert (done["applied"], done["forgotten"], done["duplicates"][0]["keep"]["id"]) == (True, 1, "new")
    with Memory(db, embedder="hash", auto_embed=False) as m:
        assert m.history("old")[-1]["reason"] == "near duplicate of new (dedup)"
    assert json.loads(run("--json", "--namespace", "nobody").stdout)["groups"] == 0


def test_mcp_remember_dedupe(tmp_path: Path) -> None:
    """``hybridmem mcp`` spawned: ``remember`` with ``dedupe`` names the memory held, writes nothing."""
    import asyncio

    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    db = tmp_path / "mcp.db"
    with Memory(db, embedder="hash", auto_embed=False) as m:
        held = m.remember("Carol is allergic to peanuts", user_id="u1").id
    env = {"PYTHONUNBUFFERED": "1", "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    args = ["-m", "hybridmem.cli", "--db", str(db), "--embedder", "hash", "mcp"]

    async def session() -> list[dict[str, object]]:
        params = StdioServerParameters(command=sys.executable, args=args, env=env)
        got = []
        with open(os.devnull, "w") as devnull:
            async with stdio_client(params, errlog=devnull) as (read, write), ClientSession(read, write) as s:
                await s.initialize()
                for text in ("carol is ALLERGIC to peanuts!", "Carol is allergic to 2 peanuts"):
                    out = await s.call_tool("remember", {"text": text, "user_id": "u1", "dedupe": True})
                    assert not out.is_error, out.content
                    got.append(json.loads(out.content[0].text))
        return got

    same, other = asyncio.run(asyncio.wait_for(session(), timeout=120))
    assert (same["event"], same["id"], same["decided_by"]) == ("NONE", held, "rule"), same
    assert other["event"] == "ADD" and other["id"] != held, other
    with Memory(db, embedder="hash", auto_embed=False) as m:
        assert m.stats().documents == 2


def test_async_twins(tmp_path: Path) -> None:
    import asyncio

    async def go() -> tuple[str, dict[str, object]]:
        with Memory(tmp_path / "a.db", embedder="hash", auto_embed=False) as m:
            await m.aremember("Dan works at Acme since 2019", user_id="u", id="one")
            await m.aremember("Dan works at ACME, since 2019.", user_id="u", id="two")
            d = await m.aremember("dan works at acme since 2019", user_id="u", dedupe=True)
            return d.event, await m.adedupe(apply=True)

    event, report = asyncio.run(go())
    assert event == "NONE" and (report["groups"], report["forgotten"]) == (1, 1)
