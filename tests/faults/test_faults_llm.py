"""LLM faults (issue 8): timeouts, hangs, 5xx storms and garbage from the provider, through the
local provider test server (tests/llm_fakes.py, the providers' real wire formats) and the whole
query path (``Memory.search(mode="rerank")`` and ``Memory.ask``).

The query path always answers: results are returned, the fallback is flagged (``reranked: false``
with the reason in ``rerank_note``; ``answerer: "extractive"`` with the reason in ``notes``), and a
call never outlives its time budget (requests x timeout + back-offs + repair), with generous margins.

Not repeated here (tests/llm/test_llm.py, test_rerank.py, test_answer.py): one 5xx run or one slow
reply at the model or reranker level, repair of invalid JSON, 4xx not retried.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from test_rerank import DOCS  # the same six-note corpus the rerank tests search

from hybridmem import Memory
from hybridmem.llm import create_chat_model
from hybridmem.retry import RetryPolicy
from llm_fakes import FakeLLMServer, Scripted, Seen, candidate_ids

TIMEOUT = 0.4  # seconds per HTTP request
POLICY = RetryPolicy(max_attempts=3, backoff=0.01, max_backoff=0.05, max_retry_after=0.2, total_timeout=5.0)
#: one ``complete`` at worst: every attempt times out, backs off, and the reply needs its repair call
CALL_BUDGET = 2 * (POLICY.max_attempts * TIMEOUT + (POLICY.max_attempts - 1) * POLICY.max_retry_after)
MARGIN = 3.0  # scheduling on two busy cores; a real hang would blow far past it
HANG = 30.0  # the server "hangs": it answers long after any client gave up


@pytest.fixture(autouse=True)
def _no_llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HYBRIDMEM_LLM", "HYBRIDMEM_RERANKER", "HYBRIDMEM_LLM_BASE_URL", "HYBRIDMEM_LLM_TIMEOUT"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as s:
        yield s


def _model(server: FakeLLMServer, provider: str = "openai"):
    base = f"{server.url}/v1" if provider == "openai" else server.url
    return create_chat_model(f"{provider}:fault-model", base_url=base, api_key="k", retry=POLICY, timeout=TIMEOUT)


@pytest.fixture
def mem(tmp_path: Path, server: FakeLLMServer) -> Iterator[Memory]:
    m = Memory(tmp_path / "m.db", embedder="hash", auto_embed=False, llm=_model(server))
    for i, t in DOCS.items():
        m.add(t, id=i, source=f"docs/{i}.md")
    m.wait_for_vectors()
    try:
        yield m
    finally:
        m.close()


def fused(mem: Memory, q: str) -> list[str]:
    """The fused order of every candidate the reranker sees (all six documents here)."""
    out = [r.chunk_id for r in mem.search(q, top_k=20).results]
    assert len(out) == len(DOCS)
    return out


def reranked(order: list[str], top_k: int = 5) -> list[str]:
    return order[::-1][:top_k]  # what rerank_ok makes of it


def rerank_ok(seen: Seen) -> str:
    return json.dumps({"ids": candidate_ids(seen)[::-1]})  # the model reverses the fused order


def answer_ok(seen: Seen) -> str:
    ids = candidate_ids(seen)
    return json.dumps({"answer": f"Raise max_connections [{ids[0]}].", "citations": [ids[0]], "found": True})


def good(seen: Seen) -> str:
    return answer_ok(seen) if seen.schema_name == "GroundedAnswer" else rerank_ok(seen)


def timed(fn, *args, **kwargs):
    t0 = time.monotonic()
    out = fn(*args, **kwargs)
    return out, time.monotonic() - t0


# ------------------------------------------------------------------------------ hangs and timeouts
def test_a_hanging_provider_never_hangs_the_query(mem: Memory, server: FakeLLMServer) -> None:
    q = "HTTP 504 pool max_connections"
    expected = fused(mem, q)
    server.responder = lambda seen: Scripted(text=good(seen), delay=HANG)
    resp, took = timed(mem.search, q, mode="rerank", top_k=5)
    assert [r.chunk_id for r in resp.results] == expected[:5]  # fused order kept, every result there
    assert resp.reranked is False and resp.reranker == "llm:openai:fault-model"
    assert "LLM rerank failed, fused order kept" in resp.rerank_note and "timed out" in resp.rerank_note
    assert len(server.requests) == POLICY.max_attempts  # retried, then gave up: no repair for a timeout
    assert resp.usage.per_call[0].ok is False and resp.usage.per_call[0].attempts == POLICY.max_attempts
    assert POLICY.max_attempts * TIMEOUT * 0.9 <= took < CALL_BUDGET + MARGIN


def test_ask_with_a_hanging_provider_answers_extractively_in_bounded_time(mem: Memory, server: FakeLLMServer) -> None:
    server.responder = lambda seen: Scripted(text=good(seen), delay=HANG)
    a, took = timed(mem.ask, "How do I fix HTTP 504 timeouts on billing?")
    assert a.answerer == "extractive" and a.found and a.citations and a.results
    assert a.reranked is False
    assert any("LLM answer failed" in n and "timed out" in n for n in a.notes), a.notes
    assert any(n.startswith("rerank: LLM rerank failed") for n in a.notes), a.notes
    assert a.usage.calls == 2 and all(not c.ok for c in a.usage.per_call)  # what the failures cost, reported
    assert took < 2 * CALL_BUDGET + MARGIN


def test_total_time_budget_cuts_a_long_retry_after(tmp_path: Path, server: FakeLLMServer) -> None:
    """A server that asks for long Retry-After pauses cannot park the query past the call budget."""
    model = create_chat_model(
        "openai:m",
        base_url=f"{server.url}/v1",
        api_key="k",
        timeout=TIMEOUT,
        retry=RetryPolicy(max_attempts=10, backoff=0.01, max_retry_after=30, total_timeout=1.5),
    )
    server.responder = lambda seen: Scripted(status=503, headers={"Retry-After": "1"})
    with Memory(tmp_path / "b.db", embedder="hash", auto_embed=False, llm=model) as m:
        for i, t in DOCS.items():
            m.add(t, id=i)
        resp, took = timed(m.search, "pipeline", mode="rerank")
    assert resp.results and resp.reranked is False and "HTTP 503" in resp.rerank_note
    assert "time budget" in resp.rerank_note and "retry after 1s" in resp.rerank_note
    assert len(server.requests) == 2  # 0 s, then 1 s later; a third would start past 1.5 s
    assert took < 1.5 + MARGIN


def test_a_slow_but_timely_provider_is_used(mem: Memory, server: FakeLLMServer) -> None:
    q = "pipeline"
    expected = fused(mem, q)
    server.responder = lambda seen: Scripted(text=good(seen), delay=TIMEOUT / 4)
    resp = mem.search(q, mode="rerank", top_k=5)
    assert resp.reranked is True and resp.rerank_note is None
    assert len(server.requests) == 1 and resp.usage.per_call[0].attempts == 1
    assert [r.chunk_id for r in resp.results] == reranked(expected)


# ------------------------------------------------------------------------------ 5xx storms
@pytest.mark.parametrize("provider", ["openai", "gemini", "anthropic"])
def test_a_5xx_storm_then_recovery(tmp_path: Path, server: FakeLLMServer, provider: str) -> None:
    """The provider fails its next 10 requests (500/502/503/529), then recovers: queries during the
    storm answer in fused order with the reason, the ones after it are reranked again."""
    storm = [Scripted(status=s) for s in (500, 502, 503, 529, 500, 503, 502, 500, 503, 500)]
    server.script = list(storm)
    server.responder = rerank_ok
    with Memory(tmp_path / "s.db", embedder="hash", auto_embed=False, llm=_model(server, provider)) as m:
        for i, t in DOCS.items():
            m.add(t, id=i)
        m.wait_for_vectors()
        expected = fused(m, "pipeline")
        outcomes = []
        t0 = time.monotonic()
        for _ in range(6):
            resp = m.search("pipeline", mode="rerank", top_k=5)
            assert [r.chunk_id for r in resp.results] == (reranked(expected) if resp.reranked else expected[:5])
            outcomes.append((resp.reranked, resp.usage.per_call[0].attempts, resp.rerank_note))
        took = time.monotonic() - t0
    # 10 failing requests: three queries give up after 3 attempts each, the 4th succeeds on its 2nd
    assert [(ok, n) for ok, n, _ in outcomes] == [(False, 3), (False, 3), (False, 3), (True, 2), (True, 1), (True, 1)]
    for ok, _, note in outcomes:
        assert (note is None) if ok else ("LLM rerank failed, fused order kept" in note and "HTTP 5" in note)
    assert len(server.requests) == 10 + 3
    assert took < 6 * CALL_BUDGET + MARGIN


def test_many_5xx_then_success_within_one_call(tmp_path: Path, server: FakeLLMServer) -> None:
    """A generous policy rides out a storm of 7 errors inside one call and still reranks."""
    model = create_chat_model(
        "openai:m",
        base_url=f"{server.url}/v1",
        api_key="k",
        timeout=TIMEOUT,
        retry=RetryPolicy(max_attempts=8, backoff=0.01, max_backoff=0.02, total_timeout=10),
    )
    server.script = [Scripted(status=503)] * 4 + [Scripted(status=429, headers={"Retry-After": "0.05"})] * 3
    server.responder = rerank_ok
    with Memory(tmp_path / "g.db", embedder="hash", auto_embed=False, llm=model) as m:
        for i, t in DOCS.items():
            m.add(t, id=i)
        resp = m.search("pipeline", mode="rerank", top_k=3)
    assert resp.reranked is True and resp.usage.calls == 1 and resp.usage.http_requests == 8


# ------------------------------------------------------------------------------ garbage
GARBAGE = {
    "html-body": Scripted(body=b"<html><body>502 Bad Gateway</body></html>"),
    "empty-body": Scripted(body=b""),
    "json-array-body": Scripted(body=[1, 2, 3]),
    "wrong-wire-schema": Scripted(body={"result": "ok", "data": {"ids": []}}),
    "truncated-json-text": Scripted(text='{"ids": ["pool_p1", "cach'),
    "wrong-schema-text": Scripted(text='{"ranking": [{"doc": "pool_p1", "score": 0.9}]}'),
    "prose-text": Scripted(text="The most relevant passage is clearly the first one."),
    "huge-text": Scripted(text="x" * 300_000),
}


@pytest.mark.parametrize("kind", sorted(GARBAGE))
def test_garbage_from_the_provider_on_both_paths(mem: Memory, server: FakeLLMServer, kind: str) -> None:
    server.responder = lambda seen: GARBAGE[kind]  # every request, repairs included
    q = "HEL-4040 pipeline validation"
    expected = fused(mem, q)
    resp, took = timed(mem.search, q, mode="rerank", top_k=5)
    assert [r.chunk_id for r in resp.results] == expected[:5]
    assert resp.reranked is False and resp.rerank_note.startswith("LLM rerank failed, fused order kept")
    assert took < CALL_BUDGET + MARGIN
    a, took = timed(mem.ask, "What does HEL-4040 mean?")
    assert a.answerer == "extractive" and a.found and a.citations[0].doc_id == "err"
    assert any("LLM answer failed" in n for n in a.notes), a.notes
    assert took < 2 * CALL_BUDGET + MARGIN
    assert "Traceback" not in " ".join(a.notes) + resp.rerank_note


def test_a_valid_answer_citing_only_unknown_chunks_is_flagged_not_trusted(mem: Memory, server: FakeLLMServer) -> None:
    server.responder = lambda seen: (
        rerank_ok(seen)
        if seen.schema_name != "GroundedAnswer"
        else json.dumps(
            {"answer": "Reboot the cluster [made_up_p1] [../../etc/passwd].", "citations": ["zzz"], "found": True}
        )
    )
    a = mem.ask("How do I fix HTTP 504?")
    assert a.answerer == "llm:openai:fault-model" and a.citations == []
    assert set(a.invented_citations) == {"made_up_p1", "../../etc/passwd", "zzz"}
    assert "made_up_p1" not in a.answer and any("ungrounded" in n for n in a.notes)


# ------------------------------------------------------------------------------ a mix, concurrently
def test_a_mix_of_faults_across_many_concurrent_queries(mem: Memory, server: FakeLLMServer) -> None:
    rng = random.Random(8)
    lock = threading.Lock()
    faults = [
        lambda seen: Scripted(text=good(seen)),
        lambda seen: Scripted(status=500),
        lambda seen: Scripted(status=503, headers={"Retry-After": "0.05"}),
        lambda seen: Scripted(status=429, headers={"Retry-After": "0.1"}),
        lambda seen: Scripted(text=good(seen), delay=HANG),
        lambda seen: Scripted(body=b"\xff\xfe not json"),
        lambda seen: Scripted(text="nope, not JSON"),
        lambda seen: Scripted(body={"choices": []}),
        lambda seen: Scripted(text=good(seen), delay=TIMEOUT / 5),
    ]

    def responder(seen: Seen) -> Scripted:
        with lock:
            pick = rng.choice(faults)
        return pick(seen)

    server.responder = responder
    questions = [
        "HTTP 504 pool",
        "HEL-4040 pipeline",
        "connector cache purge",
        "cron schedule timezone",
        "scale pipeline workers",
        "retry_backoff_ms",
    ]
    expected = {q: fused(mem, q) for q in questions}

    def one(i: int):
        q = questions[i % len(questions)]
        t0 = time.monotonic()
        if i % 3 == 2:
            out = mem.ask(q)
            return "ask", q, out, time.monotonic() - t0
        return "search", q, mem.search(q, mode="rerank", top_k=5), time.monotonic() - t0

    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=4) as pool:
        runs = list(pool.map(one, range(36)))
    wall = time.monotonic() - t0
    fell_back = succeeded = 0
    for kind, q, out, took in runs:
        if kind == "search":
            got = [r.chunk_id for r in out.results]
            if out.reranked:
                succeeded += 1
                assert out.rerank_note is None and got == reranked(expected[q]), q
            else:
                fell_back += 1
                assert out.rerank_note.startswith("LLM rerank failed, fused order kept")
                assert got == expected[q][:5], q
            assert took < CALL_BUDGET + MARGIN, (q, took)
        else:
            assert len(out.results) == 5 and out.answer  # found or not: the fake reverses the ranking
            assert out.answerer in ("extractive", "llm:openai:fault-model")
            if out.answerer == "extractive":
                fell_back += 1
                assert any("LLM answer failed" in n for n in out.notes), out.notes
            else:
                succeeded += 1
                assert [c.chunk_id for c in out.citations] == [out.results[0].chunk_id]
            assert took < 2 * CALL_BUDGET + MARGIN, (q, took)
    assert fell_back and succeeded  # the mix did exercise both outcomes
    assert wall < 36 / 4 * 2 * CALL_BUDGET + MARGIN
    # with faults everywhere, plain queries never touch the LLM
    before = len(server.requests)
    assert all(mem.search(q, top_k=5).reranked is False for q in questions)
    assert len(server.requests) == before
