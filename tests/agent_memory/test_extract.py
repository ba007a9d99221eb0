"""Facts from conversations (issue 46): ``Memory.add_messages(..., extract=True)`` has the LLM read
the new turns in batches and propose facts (structured output); each checked fact goes through the
conflict check and is stored as ``kind: "fact"`` naming its source turns; a failing model leaves
the batch pending (the turns stored) until ``extract_pending`` retries it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hybridmem import Memory
from hybridmem.errors import NotFoundError, ValidationError
from hybridmem.llm.openai import OpenAIChatModel
from llm_fakes import FAST, FakeLLMServer, Scripted, ScriptedChatModel

TURNS = [
    {"role": "user", "name": "Caroline", "content": "I moved to Lisbon last month!", "timestamp": "2023-06-10T10:00Z"},
    {"role": "user", "name": "Melanie", "content": "Wow! How is the new flat?", "timestamp": "2023-06-10T10:01Z"},
    {
        "role": "user",
        "name": "Caroline",
        "content": "Great. I also adopted a cat, Luna.",
        "timestamp": "2023-06-10T10:02Z",
    },
    {"role": "user", "name": "Melanie", "content": "Cute! See you soon.", "timestamp": "2023-06-10T10:03Z"},
]


def _fact(text: str, turns: list[str], key: str | None = None, when: str | None = None) -> dict[str, Any]:
    return {"text": text, "key": key, "occurred_at": when, "source_turns": turns}


def _facts(*facts: dict[str, Any]) -> str:
    return json.dumps({"facts": list(facts)})


def _verdict(event: str, target: str | None = None, text: str | None = None, reason: str = "because") -> str:
    return json.dumps({"event": event, "target_id": target, "text": text, "reason": reason})


def _is_extraction(messages: list[dict[str, str]]) -> bool:
    return "extract long-term memory facts" in messages[0]["content"]


class Router:
    """A scripted model for both calls of an extraction: ``extract(prompt)`` answers an extraction
    call, ``check(existing, new)`` a conflict check (default: ADD)."""

    def __init__(self, extract: Callable[[str], str], check: Callable[[list[dict], str], str] | None = None) -> None:
        self.extract, self.check = extract, check or (lambda existing, new: _verdict("ADD"))
        self.prompts: list[str] = []
        self.checks: list[tuple[list[dict], str]] = []

    def __call__(self, messages: list[dict[str, str]]) -> str:
        user = messages[-1]["content"]
        if _is_extraction(messages):
            self.prompts.append(user)
            return self.extract(user)
        existing, _, new = user.removeprefix("EXISTING:\n").partition("\n\nNEW:\n")
        self.checks.append((json.loads(existing), new))
        return self.check(json.loads(existing), new)


def _memory(path: str | Path, router: Router | None = None, **kw: Any) -> tuple[Memory, ScriptedChatModel]:
    llm = ScriptedChatModel([router] * 200 if router else [])
    return Memory(path, embedder="hash", auto_embed=False, llm=llm, **kw), llm


def test_facts_are_stored_with_their_turns_kind_and_time(tmp_path: Path) -> None:
    reply = _facts(
        _fact("Caroline moved to Lisbon.", ["s1:0"], key="caroline.city", when="last month"),
        _fact("Caroline adopted a cat named Luna.", ["s1:2", "s9:9"]),  # the invented id is dropped
        _fact("Melanie likes cats.", ["s7:1"]),  # no turn of the batch: dropped
        _fact("   ", ["s1:1"]),  # empty: dropped
    )
    router = Router(lambda prompt: reply)
    m, llm = _memory(tmp_path / "x.db", router)
    with m:
        report = m.add_messages(TURNS, session_id="s1", user_id="u1", extract=True)
        assert report.added == ["s1:0", "s1:1", "s1:2", "s1:3"]  # the turns are stored as always
        ex = report.extraction
        assert ex is not None and ex.model == "scripted:test" and ex.pending == 0
        (batch,) = ex.batches
        assert batch.status == "done" and batch.turns == report.added and batch.session_id == "s1"
        assert [f.text for f in batch.facts] == ["Caroline moved to Lisbon.", "Caroline adopted a cat named Luna."]
        assert [f.source_turns for f in batch.facts] == [["s1:0"], ["s1:2"]]
        assert [d.reason.split(" (")[0] for d in batch.dropped] == ["no source turn of this batch", "empty text"]
        lisbon, cat = batch.facts
        assert lisbon.key == "caroline.city" and lisbon.occurred_at == "2023-05-01T00:00:00.000Z"
        assert lisbon.occurred_text == "last month" and lisbon.event == "ADD"
        assert cat.occurred_at == "2023-06-10T10:02:00.000Z"  # no time said: when the turn was said
        # the prompt: every turn with its id and time, the schema asked for by name
        assert "[s1:2] (2023-06-10T10:02:00Z) Caroline: Great. I also adopted a cat, Luna." in router.prompts[0]
        stored = m.get(lisbon.id)
        assert stored["metadata"] == {
            "kind": "fact",
            "source_turns": ["s1:0"],
            "source_session": "s1",
            "key": "caroline.city",
            "occurred_text": "last month",
            "user_id": "u1",
        }
        assert m.get("s1:0")["metadata"]["kind"] == "turn"
        (version,) = m.history(cat.id)
        assert version["reason"].endswith("from turns s1:2") and version["current"]
        # usage: one extraction call, then one check per fact that had similar facts to compare with
        assert batch.usage.calls == 1 + len(router.checks) and ex.usage.total_tokens == batch.usage.total_tokens
        assert batch.usage.per_call[0].purpose == "extract" and len(llm.seen) == batch.usage.calls


def test_kind_filter_returns_facts_or_turns_and_each_hit_says_which(tmp_path: Path) -> None:
    reply = _facts(_fact("Caroline adopted a cat named Luna.", ["s1:2"]))
    m, _ = _memory(tmp_path / "k.db", Router(lambda prompt: reply))
    with m:
        m.add_messages(TURNS, session_id="s1", user_id="u1", extract=True)
        m.add("A note about Luna the cat.", id="note")  # neither: no kind
        both = m.search({"search_text": "cat Luna", "top_k": 10, "mode": "bm25"}).results
        assert {(h.doc_id, h.kind) for h in both} >= {("s1:2", "turn"), ("note", None)}
        assert any(h.kind == "fact" for h in both)
        facts = m.search({"search_text": "cat Luna", "mode": "bm25", "metadata_filter": {"kind": "fact"}}).results
        assert facts and all(h.kind == "fact" and h.doc_id.startswith("fact-") for h in facts)
        turns = m.search({"search_text": "cat Luna", "mode": "bm25", "metadata_filter": {"kind": "turn"}}).results
        assert {h.doc_id for h in turns} == {"s1:2", "s1:3"}  # s1:3 by its context (the turn before)
        assert all(h.kind == "turn" for h in turns)


def test_a_key_held_by_a_fact_supersedes_it_and_a_check_update_keeps_history(tmp_path: Path) -> None:
    first = _facts(
        _fact("Caroline lives in Lisbon.", ["s1:0"], key="caroline.city"),
        _fact("Caroline has a cat named Luna.", ["s1:2"]),
    )
    later = _facts(
        _fact("Caroline lives in Porto now.", ["s1:4"], key="caroline.city"),
        _fact("Caroline has two cats, Luna and Sol.", ["s1:5"]),
    )
    replies = iter([first, later])

    def check(existing: list[dict], new: str) -> str:
        cat = next((c["id"] for c in existing if "cat named Luna" in c["text"]), None)
        return _verdict("UPDATE", cat, new, "a second cat") if cat and "two cats" in new else _verdict("ADD")

    router = Router(lambda prompt: next(replies), check)
    m, _ = _memory(tmp_path / "s.db", router)
    with m:
        one = m.add_messages(TURNS, session_id="s1", user_id="u1", extract=True).extraction
        assert one is not None
        city, cat = (f.id for f in one.batches[0].facts)
        more = [
            {"role": "user", "name": "Caroline", "content": "We moved again, to Porto.", "timestamp": "2023-09-01"},
            {
                "role": "user",
                "name": "Caroline",
                "content": "And Luna has a brother now: Sol.",
                "timestamp": "2023-09-01",
            },
        ]
        two = m.add_messages(more, session_id="s1", user_id="u1", extract=True).extraction
        assert two is not None
        porto, cats = two.batches[0].facts
        assert (porto.event, porto.id, porto.decided_by) == ("UPDATE", city, "rule")
        assert (cats.event, cats.id, cats.decided_by) == ("UPDATE", cat, "scripted:test")
        assert "Lisbon" in router.prompts[1] and "caroline.city" in router.prompts[1]  # known facts shown
        versions = m.history(city)
        assert [v["current"] for v in versions] == [False, True]
        assert "Lisbon" in versions[0]["text"] and "Porto" in versions[1]["text"]
        assert versions[0]["metadata"]["source_turns"] == ["s1:0"] and versions[1]["metadata"]["source_turns"] == [
            "s1:4"
        ]
        assert (
            versions[1]["reason"]
            == "UPDATE (rule): the fact holding key 'caroline.city' gets a new value; from turns s1:4"
        )
        cat_versions = m.history(cat)
        assert cat_versions[1]["reason"] == "UPDATE (scripted:test): a second cat; from turns s1:5"
        current = m.search({"search_text": "Caroline lives", "mode": "bm25", "metadata_filter": {"kind": "fact"}})
        assert city in {h.doc_id for h in current.results}
        assert all("Lisbon" not in h.text for h in current.results if h.kind == "fact")
        assert m.get("s1:0")["chunks"][0]["text"].startswith("Caroline: I moved to Lisbon")  # turns untouched


def test_invalid_json_leaves_the_batch_pending_and_a_retry_stores_its_facts(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    m, llm = _memory(db)
    llm.replies.extend(["not json at all", '{"facts": [{"text": 3'])  # the repair fails too
    with m:
        report = m.add_messages(TURNS, session_id="s1", extract=True, extract_batch=3)
        ex = report.extraction
        assert ex is not None and [b.status for b in ex.batches] == ["pending", "done"]
        assert report.added == ["s1:0", "s1:1", "s1:2", "s1:3"]  # nothing lost
        bad = ex.batches[0]
        assert bad.turns == ["s1:0", "s1:1", "s1:2"] and "invalid output after one repair" in (bad.error or "")
        assert bad.usage.calls == 2 and ex.pending == 1 and ex.usage.calls == 3
    router = Router(lambda prompt: _facts(_fact("Caroline moved to Lisbon.", ["s1:0"])))
    m, _ = _memory(db, router)  # another process, later: the pending batch is in the store
    with m:
        again = m.extract_pending()
        assert [b.status for b in again.batches] == ["done"] and again.pending == 0
        assert again.batches[0].turns == ["s1:0", "s1:1", "s1:2"]
        assert [f.source_turns for f in again.facts] == [["s1:0"]]
        assert "[s1:0]" in router.prompts[0] and "[s1:3]" not in router.prompts[0]
        assert m.extract_pending().batches == []  # nothing left


def test_a_model_that_times_out_leaves_the_batch_pending(tmp_path: Path) -> None:
    with FakeLLMServer() as server:
        server.script = [Scripted(text=_facts(), delay=1.0) for _ in range(3)]
        llm = OpenAIChatModel("slow", base_url=f"{server.url}/v1", api_key="k", retry=FAST, timeout=0.2)
        with Memory(tmp_path / "t.db", embedder="hash", auto_embed=False, llm=llm) as m:
            report = m.add_messages(TURNS[:2], session_id="s1", extract=True)
            assert report.added == ["s1:0", "s1:1"]
            assert report.extraction is not None and report.extraction.batches[0].status == "pending"
            assert report.extraction.pending == 1 and m.stats().documents == 2


def test_without_an_llm_extract_is_refused_naming_the_field_and_nothing_is_written(tmp_path: Path) -> None:
    with Memory(tmp_path / "n.db", embedder="hash", auto_embed=False, llm="none") as m:
        with pytest.raises(ValidationError) as e:
            m.add_messages(TURNS, session_id="s1", extract=True)
        assert e.value.field == "extract" and "LLM" in str(e.value)
        for bad, field in (({"extract": "yes"}, "extract"), ({"extract_batch": 0}, "extract_batch")):
            with pytest.raises(ValidationError) as e:
                m.add_messages(TURNS, session_id="s1", **bad)
            assert e.value.field == field
        with pytest.raises(ValidationError) as e:
            m.extract_pending()
        assert e.value.field == "extract"
        with pytest.raises(ValidationError) as e:  # a message cannot pass itself off as a fact
            m.add_messages([{**TURNS[0], "metadata": {"kind": "fact"}}], session_id="s1")
        assert e.value.field == "messages[0].metadata" and "kind" in str(e.value)
        assert m.stats().documents == 0


def test_facts_of_one_namespace_never_reach_another(tmp_path: Path) -> None:
    def extract(prompt: str) -> str:
        who = "Alice" if "Alice" in prompt else "Bob"
        return _facts(_fact(f"{who} lives in Lisbon.", [prompt.split("[")[-1].split("]")[0]], key="city"))

    router = Router(extract)
    m, _ = _memory(tmp_path / "t.db", router)
    with m:
        m.add_messages(
            [{"role": "user", "name": "Alice", "content": "I live in Lisbon."}],
            session_id="s",
            namespace="a",
            extract=True,
        )
        got = m.add_messages(
            [{"role": "user", "name": "Bob", "content": "I live in Lisbon."}],
            session_id="s",
            namespace="b",
            extract=True,
        ).extraction
        assert got is not None and got.batches[0].known == [] and "Alice" not in router.prompts[1]
        (bob,) = got.facts
        assert bob.event == "ADD"  # the same key in namespace a is not this namespace's
        for ns, who in (("a", "Alice"), ("b", "Bob")):
            hits = m.search(
                {"search_text": "lives Lisbon", "mode": "bm25", "namespace": ns, "metadata_filter": {"kind": "fact"}}
            )
            assert [h.text for h in hits.results] == [f"{who} lives in Lisbon."]
        assert m.extract_pending(namespace="*").pending == 0


def test_the_openai_wire_carries_the_schema_and_the_reply_is_parsed(tmp_path: Path) -> None:
    """The real OpenAI client over HTTP: the extraction is asked as a JSON schema and applied."""
    with FakeLLMServer() as server:
        server.responder = lambda seen: _facts(_fact("Caroline adopted a cat named Luna.", ["s1:2"]))
        llm = OpenAIChatModel("test-model", base_url=f"{server.url}/v1", api_key="k", retry=FAST)
        with Memory(tmp_path / "o.db", embedder="hash", auto_embed=False, llm=llm) as m:
            ex = m.add_messages(TURNS, session_id="s1", extract=True).extraction
            assert ex is not None and ex.model == "openai:test-model"
            (fact,) = ex.facts
            assert fact.source_turns == ["s1:2"] and m.get(fact.id)["metadata"]["kind"] == "fact"
            (seen,) = server.requests
            assert seen.body["model"] == "test-model" and seen.schema_name == "ProposedFacts"
            schema = seen.body["response_format"]["json_schema"]["schema"]
            item = schema["properties"]["facts"]["items"]
            assert set(item["properties"]) == {"text", "key", "occurred_at", "source_turns"}
            assert "[s1:0]" in seen.prompt and ex.usage.prompt_tokens == 11 and ex.usage.completion_tokens == 7


def test_async_extractions_run_at_most_the_concurrency_limit_at_once(tmp_path: Path) -> None:
    import asyncio
    import threading
    import time

    from hybridmem.extract import CONCURRENCY

    lock, running, peak = threading.Lock(), [0], [0]

    def slow(prompt: str) -> str:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.15)
        with lock:
            running[0] -= 1
        turn = prompt.split("NEW TURNS:\n[", 1)[1].split("]", 1)[0]
        return _facts(_fact(f"Fact of {turn}.", [turn]))

    m, _ = _memory(tmp_path / "a.db", Router(slow))

    async def main() -> list[Any]:
        calls = [
            m.aadd_messages(TURNS[:1], session_id=f"s{i}", user_id=f"u{i}", extract=True)
            for i in range(CONCURRENCY + 2)
        ]
        return await asyncio.gather(*calls)

    with m:
        reports = asyncio.run(main())
        assert [r.extraction.facts[0].text for r in reports] == [f"Fact of s{i}:0." for i in range(CONCURRENCY + 2)]
        assert 1 <= peak[0] <= CONCURRENCY, peak
        assert asyncio.run(m.aextract_pending()).pending == 0


def test_pending_batches_are_kept_by_both_backends(target: str | Path) -> None:
    """The pending batches live in the store (its meta table): a new process on the same SQLite
    file or PostgreSQL database finds them, and a retry takes each one once."""
    llm = ScriptedChatModel(["not json", "still not json"])
    with Memory(target, embedder="hash", auto_embed=False, llm=llm) as m:
        ex = m.add_messages(TURNS, session_id="s1", user_id="u1", namespace="a", extract=True).extraction
        assert ex is not None and ex.pending == 1 and ex.batches[0].status == "pending"
    router = Router(lambda prompt: _facts(_fact("Caroline adopted a cat named Luna.", ["s1:2"])))
    m, _ = _memory(target, router)
    with m:
        assert m.extract_pending(namespace="b").batches == []  # another namespace's batches are not run
        got = m.extract_pending(namespace="a", limit=5)
        assert [b.turns for b in got.batches] == [["s1:0", "s1:1", "s1:2", "s1:3"]] and got.pending == 0
        (fact,) = got.facts
        assert m.get(fact.id, namespace="a")["metadata"]["source_turns"] == ["s1:2"]
        assert m.extract_pending(namespace="*").batches == [] and len(router.prompts) == 1


def test_the_per_call_budget_cuts_batches_and_bounds_the_facts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYBRIDMEM_EXTRACT_MAX_CHARS", "500")
    monkeypatch.setenv("HYBRIDMEM_EXTRACT_MAX_FACTS", "1")
    long = [{"role": "user", "name": "Ann", "content": f"Story {i}: " + "word " * 40} for i in range(4)]
    big = [{"role": "user", "name": "Ann", "content": "Huge: " + "x" * 3000}]

    def extract(prompt: str) -> str:
        first = prompt.split("NEW TURNS:\n[", 1)[1].split("]", 1)[0]
        return _facts(_fact(f"Ann told story {first}.", [first]), _fact("Ann talks a lot.", [first]))

    router = Router(extract)
    m, _ = _memory(tmp_path / "b.db", router)
    with m:
        ex = m.add_messages(long, session_id="s", extract=True).extraction
        assert ex is not None and [b.turns for b in ex.batches] == [
            ["s:0", "s:1"],
            ["s:2", "s:3"],
        ]  # ~220 characters a turn
        assert all(len(b.facts) == 1 for b in ex.batches)
        assert all(b.dropped[0].reason == "over the limit of 1 facts per batch" for b in ex.batches)
        m.add_messages(big, session_id="s", extract=True)
        assert len(router.prompts[-1].split("NEW TURNS:\n", 1)[1]) < 600  # a turn over the budget is cut
        monkeypatch.setenv("HYBRIDMEM_EXTRACT_MAX_CHARS", "lots")
        with pytest.raises(ValidationError) as e:
            m.add_messages(long, session_id="s", extract=True)
        assert e.value.field == "HYBRIDMEM_EXTRACT_MAX_CHARS"


@pytest.mark.parametrize("provider", ["gemini", "anthropic"])
def test_gemini_and_anthropic_wires_carry_the_extraction_too(tmp_path: Path, provider: str) -> None:
    """The real Gemini and Anthropic clients over HTTP: the schema asked in each one's form, the
    reply (Gemini's JSON text, Anthropic's forced tool call) parsed into facts."""
    from test_llm import model_for

    with FakeLLMServer() as server:
        server.responder = lambda seen: _facts(_fact("Caroline adopted a cat named Luna.", ["s1:2"], key="pet"))
        llm = model_for(provider, server, retry=FAST)
        with Memory(tmp_path / "w.db", embedder="hash", auto_embed=False, llm=llm) as m:
            ex = m.add_messages(TURNS, session_id="s1", extract=True).extraction
            assert ex is not None and ex.model == f"{provider}:test-model"
            (fact,) = ex.facts
            assert (fact.source_turns, fact.key) == (["s1:2"], "pet")
            (seen,) = server.requests
            assert seen.provider == provider and seen.schema_name in ("json", "ProposedFacts")
            assert "[s1:2]" in seen.prompt and ex.usage.prompt_tokens == 11


def test_a_session_stored_without_extract_can_be_extracted_later(tmp_path: Path) -> None:
    long_turn = {"role": "user", "name": "Caroline", "content": "I adopted a cat. " + "Luna purrs. " * 150}
    router = Router(lambda prompt: _facts(_fact("Caroline adopted a cat named Luna.", ["s1:4"])))
    m, _ = _memory(tmp_path / "later.db", router, chunk_size=500)
    with m:
        m.add_messages([*TURNS, long_turn], session_id="s1", user_id="u1")  # no extract: no call
        assert router.prompts == []
        ex = m.extract_session("s1", extract_batch=10)
        (batch,) = ex.batches
        assert batch.turns == ["s1:0", "s1:1", "s1:2", "s1:3", "s1:4"] and batch.session_id == "s1"
        assert (
            router.prompts[0].count("[s1:4]") == 1 and "Luna purrs. Luna purrs." in router.prompts[0]
        )  # chunks joined
        (fact,) = ex.facts
        assert m.get(fact.id)["metadata"]["user_id"] == "u1"  # the scope read from the turns
        with pytest.raises(NotFoundError):
            m.extract_session("nope")
