"""Reranking: id repair (the reference example), sliding windows, the identifier reranker, the LLM
reranker over a local HTTP server (invented ids, empty lists, failures → fused order), and
``mode: "rerank"`` / ``rerank: true`` through Memory.search."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from hybridmem import Memory, QueryRequest
from hybridmem.errors import ValidationError
from hybridmem.llm import create_chat_model
from hybridmem.models import QueryResult
from hybridmem.rerank import (
    MAX_CHARS,
    IdentifierReranker,
    LLMReranker,
    RerankOutcome,
    repair_ids,
    windows,
)
from llm_fakes import FAST, FakeLLMServer, Scripted, ScriptedChatModel, candidate_ids


def cands(ids: list[str], texts: list[str] | None = None) -> list[QueryResult]:
    texts = texts or [f"passage about {i}" for i in ids]
    return [
        QueryResult(chunk_id=i, rrf_score=1.0 / (60 + n), text=t, doc_id=i.split("_")[0])
        for n, (i, t) in enumerate(zip(ids, texts), start=1)
    ]


# ------------------------------------------------------------------------ pure parts
def test_repair_reference_example() -> None:
    assert repair_ids(["c", "zzz", "c", "a"], ["a", "b", "c"], [0, 1, 2]) == [2, 0, 1]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ([], [0, 1, 2]),  # an empty list keeps the fused order
        (["zzz", "yyy"], [0, 1, 2]),  # nothing valid: fused order
        (["b"], [1, 0, 2]),  # forgotten ones appended in fused order
        (["c", "b", "a"], [2, 1, 0]),
        ([" b ", "[c]"], [1, 2, 0]),  # whitespace and echoed brackets tolerated
        ([2, "a"], [0, 1, 2]),  # positions are not ids
    ],
)
def test_repair_rules(answer: list, expected: list[int]) -> None:
    assert repair_ids(answer, ["a", "b", "c"], [0, 1, 2]) == expected


def test_repair_within_a_window_ignores_ids_outside_it() -> None:
    docs = ["a", "b", "c", "d", "e"]
    # window over positions 2..4: "a" is a real id but not a candidate of this window
    assert repair_ids(["e", "a", "d"], docs, [2, 3, 4]) == [4, 3, 2]
    assert sorted(repair_ids(["zz"], docs, [4, 2, 3])) == [2, 3, 4]


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (0, []),
        (1, [(0, 1)]),
        (20, [(0, 20)]),
        (21, [(1, 21), (0, 11)]),
        (30, [(10, 30), (0, 20)]),
        (45, [(25, 45), (15, 35), (5, 25), (0, 15)]),
    ],
)
def test_windows_bottom_up(n: int, expected: list[tuple[int, int]]) -> None:
    assert windows(n, 20, 10) == expected


# ------------------------------------------------------------------------ identifier reranker
def test_identifier_reranker_moves_exact_identifiers_ahead() -> None:
    c = cands(
        ["gen_p1", "other_p1", "code_p1", "both_p1"],
        [
            "General advice on pipelines.",
            "HEL-4041 is another error.",
            "HEL-4040: pipeline definition rejected.",
            "HEL-4040 happens when max_connections is too low.",
        ],
    )
    out = IdentifierReranker().rerank("HEL-4040 with max_connections?", c)
    assert out.order == [3, 2, 0, 1]  # both identifiers > one > none (fused order among equals)
    assert out.reranked and out.reranker == "identifier" and out.note is None and out.usage is None


def test_identifier_reranker_http_status_and_no_identifier() -> None:
    c = cands(["a_p1", "b_p1"], ["a timeout somewhere", "the gateway returned HTTP 504 again"])
    assert IdentifierReranker().rerank("why HTTP 504?", c).order == [1, 0]
    out = IdentifierReranker().rerank("why so slow?", c)
    assert out.order == [0, 1] and "no exact identifier" in out.note
    out = IdentifierReranker().rerank("HEL-9999?", c)
    assert out.order == [0, 1] and "no candidate contains" in out.note


# ------------------------------------------------------------------------ LLM reranker over HTTP
@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as s:
        yield s


def llm_reranker(server: FakeLLMServer, provider: str = "openai", **kw) -> LLMReranker:
    base = f"{server.url}/v1" if provider == "openai" else server.url
    return LLMReranker(
        create_chat_model(f"{provider}:test-model", base_url=base, api_key="k", retry=FAST, timeout=2), **kw
    )


@pytest.mark.parametrize("provider", ["openai", "gemini", "anthropic"])
def test_llm_rerank_with_invented_and_repeated_ids(provider: str, server: FakeLLMServer) -> None:
    server.script = [Scripted(text=json.dumps({"ids": ["c_p1", "zzz", "c_p1", "a_p1"]}), usage=(300, 20))]
    out = llm_reranker(server, provider).rerank("which one?", cands(["a_p1", "b_p1", "c_p1"]))
    assert out.order == [2, 0, 1] and out.reranked and out.note is None
    assert out.reranker == f"llm:{provider}:test-model"
    assert out.usage.calls == 1 and out.usage.prompt_tokens == 300 and out.usage.per_call[0].purpose == "rerank"


def test_llm_rerank_prompt(server: FakeLLMServer) -> None:
    server.script = [Scripted(text='{"ids": []}')]
    long = "word " * 1000
    out = llm_reranker(server).rerank(
        "J'obtiens HEL-4040 avec max_connections, que faire ?", cands(["a_p1", "b_p1"], ["short text", long])
    )
    assert out.order == [0, 1] and out.reranked  # an empty list is a valid answer: fused order
    prompt = server.requests[0].prompt
    assert candidate_ids(server.requests[0]) == ["a_p1", "b_p1"]  # ids, in fused order
    assert "exact identifier cited in the question" in prompt and "goes first" in prompt
    assert "HEL-4040, max_connections" in prompt  # as the user wrote them
    line = next(x for x in prompt.splitlines() if x.startswith("[b_p1]"))
    assert len(line) <= MAX_CHARS + 20 and line.endswith("…")  # long candidates truncated


def test_sliding_window_over_25_candidates(server: FakeLLMServer) -> None:
    ids = [f"d{i:02d}_p1" for i in range(25)]
    server.responder = lambda seen: json.dumps({"ids": candidate_ids(seen)[::-1]})  # the model reverses each window
    out = llm_reranker(server).rerank("q", cands(ids))
    assert len(server.requests) == 2  # windows [5, 25) then [0, 15)
    assert candidate_ids(server.requests[0]) == ids[5:]
    expected = list(range(25))
    expected[5:25] = expected[5:25][::-1]
    assert candidate_ids(server.requests[1]) == [ids[i] for i in expected[:15]]  # sees the first window's result
    expected[0:15] = expected[0:15][::-1]
    assert out.order == expected and out.reranked
    assert out.usage.calls == 2


def test_the_best_candidate_climbs_from_the_bottom_to_the_top(server: FakeLLMServer) -> None:
    ids = [f"d{i:02d}_p1" for i in range(45)]
    server.responder = lambda seen: json.dumps({"ids": ["d44_p1"]})  # the model only ever names d44
    out = llm_reranker(server).rerank("q", cands(ids))
    assert len(server.requests) == 4
    assert out.order == [44, *range(44)]  # last in fused order, first after four windows; the rest keep their order


@pytest.mark.parametrize(
    ("script", "needle", "calls", "requests"),
    [
        ([Scripted(status=500)] * 3, "HTTP 500", [(False, 3)], 3),
        (
            [Scripted(text="no json here"), Scripted(text="still none")],
            "invalid output after one repair attempt",
            [(True, 1), (True, 1)],
            2,
        ),
        ([Scripted(status=401, body={"error": {"message": "bad key"}})], "bad key", [(False, 1)], 1),
    ],
)
def test_llm_failure_keeps_fused_order_with_the_reason(
    server: FakeLLMServer, script: list, needle: str, calls: list, requests: int
) -> None:
    server.script = list(script)
    out = llm_reranker(server).rerank("q", cands(["a_p1", "b_p1", "c_p1"]))
    assert out.order == [0, 1, 2] and out.reranked is False
    assert out.note.startswith("LLM rerank failed, fused order kept") and needle in out.note
    assert [(c.ok, c.attempts) for c in out.usage.per_call] == calls  # what the failure cost is still reported
    assert len(server.requests) == requests


def test_llm_slow_reply_falls_back(server: FakeLLMServer) -> None:
    server.script = [Scripted(text='{"ids": ["b_p1"]}', delay=1.0)] * 3
    r = LLMReranker(create_chat_model("openai:m", base_url=f"{server.url}/v1", retry=FAST, timeout=0.2))
    out = r.rerank("q", cands(["a_p1", "b_p1"]))
    assert out.reranked is False and "timed out" in out.note and out.order == [0, 1]


def test_numeric_ids_from_the_model_are_accepted(server: FakeLLMServer) -> None:
    server.script = [Scripted(text='{"ids": [42, 7]}')]
    out = llm_reranker(server).rerank("q", cands(["7", "42"]))
    assert out.order == [1, 0] and out.reranked


def test_a_single_candidate_needs_no_call(server: FakeLLMServer) -> None:
    out = llm_reranker(server).rerank("q", cands(["a_p1"]))
    assert out.order == [0] and out.reranked and not server.requests


# ------------------------------------------------------------------------ Memory.search
DOCS = {
    "pool": "PostgreSQL connection pool exhaustion causes HTTP 504 timeouts on billing. Increase max_connections.",
    "cache": "Purge the connector cache when a data source returns stale results: helio connector purge.",
    "err": "HEL-4040 means the pipeline definition was rejected by strict validation of the pipeline file.",
    "retry": "retry_backoff_ms sets the wait between pipeline retries of a connector.",
    "sched": "A pipeline schedule uses a cron expression and a timezone.",
    "scale": "Scale the pipeline workers when the pipeline queue grows.",
}


@pytest.fixture
def filled(mem: Memory) -> Memory:
    for i, t in DOCS.items():
        mem.add(t, id=i, metadata={"env": "prod" if i != "sched" else "staging"})
    mem.wait_for_vectors()
    return mem


@pytest.fixture(autouse=True)
def _no_llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HYBRIDMEM_LLM", "HYBRIDMEM_RERANKER", "HYBRIDMEM_LLM_BASE_URL"):
        monkeypatch.delenv(var, raising=False)


def reverse_ids(messages) -> str:
    text = messages[-1]["content"]
    return json.dumps({"ids": [line[1:].split("]")[0] for line in text.splitlines() if line.startswith("[")][::-1]})


def test_mode_rerank_reorders_but_keeps_fused_scores(filled: Memory) -> None:
    fused = filled.search("pipeline", top_k=20)
    assert fused.reranked is False and fused.reranker is None and fused.usage is None
    llm = ScriptedChatModel([reverse_ids])
    filled.llms.set(llm)
    resp = filled.search("pipeline", mode="rerank", top_k=3)
    assert resp.mode == "rerank" and resp.reranked and resp.reranker == "llm:scripted:test"
    assert [r.chunk_id for r in resp.results] == [r.chunk_id for r in fused.results][::-1][:3]
    score = {r.chunk_id: r.rrf_score for r in fused.results}
    assert all(r.rrf_score == score[r.chunk_id] for r in resp.results)  # rrf_score stays the fused score
    assert resp.total_retrieved == 3
    assert resp.usage.calls == 1 and resp.usage.prompt_tokens == 100
    assert len(llm.seen) == 1 and len(candidate_lines(llm.seen[0])) == len(fused.results)  # all candidates, one call


def candidate_lines(messages) -> list[str]:
    return [x for x in messages[-1]["content"].splitlines() if x.startswith("[")]


def test_rerank_without_llm_uses_the_identifier_reranker_and_says_so(filled: Memory) -> None:
    resp = filled.search("pipeline HEL-4040", mode="rerank", top_k=3)
    assert resp.reranked and resp.reranker == "identifier"
    assert resp.results[0].chunk_id.startswith("err")
    assert "no LLM configured" in resp.rerank_note and "identifier reranker" in resp.rerank_note
    assert resp.usage is None


def test_rerank_true_in_the_json_request_reranks_any_mode(filled: Memory) -> None:
    req = QueryRequest.model_validate({"search_text": "HTTP 504 pool", "mode": "bm25", "rerank": True, "top_k": 2})
    resp = filled.search(req)
    assert resp.mode == "bm25" and resp.reranked and resp.reranker == "identifier"
    assert resp.legs["dense"].status == "skipped"
    data = json.loads(resp.model_dump_json())
    assert {"reranked", "reranker", "rerank_note", "usage"} <= set(data)


def test_request_level_reranker_choice(filled: Memory) -> None:
    filled.llms.set(ScriptedChatModel([reverse_ids]))
    resp = filled.search("pipeline", mode="rerank", reranker="identifier")
    assert resp.reranker == "identifier" and resp.usage is None
    filled.llms.set(None)
    resp = filled.search("pipeline", mode="rerank", reranker="llm")
    assert resp.reranker == "identifier" and "instead of the LLM reranker asked for" in resp.rerank_note
    with pytest.raises(ValidationError, match="reranker"):
        filled.search("pipeline", mode="rerank", reranker="cohere")


def test_llm_failure_in_search_keeps_fused_order(filled: Memory) -> None:
    fused = filled.search("pipeline", top_k=3)
    filled.llms.set(ScriptedChatModel(["not json", "nope"]))
    resp = filled.search("pipeline", mode="rerank", top_k=3)
    assert resp.reranked is False and resp.reranker == "llm:scripted:test"
    assert "invalid output after one repair attempt" in resp.rerank_note
    assert [r.chunk_id for r in resp.results] == [r.chunk_id for r in fused.results]
    assert resp.usage.calls == 2  # the failed call and its repair are still accounted for


def test_memory_reranker_setting_and_env(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValidationError, match="reranker"):
        Memory(tmp_path / "a.db", embedder="hash", auto_embed=False, reranker="best")
    monkeypatch.setenv("HYBRIDMEM_RERANKER", "identifier")
    with Memory(tmp_path / "b.db", embedder="hash", auto_embed=False, llm=ScriptedChatModel([reverse_ids])) as m:
        m.add("HEL-4040 pipeline", id="x")
        resp = m.search("HEL-4040", mode="rerank")
        assert resp.reranker == "identifier" and resp.rerank_note is None


def test_custom_reranker_and_its_failures(tmp_path) -> None:
    class Backwards:
        name = "backwards"

        def rerank(self, query, candidates):
            return RerankOutcome(list(range(len(candidates)))[::-1], True, self.name)

    class Broken:
        name = "broken"

        def rerank(self, query, candidates):
            return RerankOutcome([0, 0], True, self.name)

    with Memory(tmp_path / "c.db", embedder="hash", auto_embed=False, reranker=Backwards()) as m:
        for i, t in DOCS.items():
            m.add(t, id=i)
        fused = [r.chunk_id for r in m.search("pipeline", top_k=20).results]
        assert [r.chunk_id for r in m.search("pipeline", mode="rerank", top_k=20).results] == fused[::-1]
        m.answers.reranker = Broken()
        resp = m.search("pipeline", mode="rerank", top_k=20)
        assert resp.reranked is False and "not a permutation" in resp.rerank_note
        assert [r.chunk_id for r in resp.results] == fused


def test_unusable_llm_in_env_becomes_a_note_not_a_failure(filled: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYBRIDMEM_LLM", "openai:gpt-4o-mini")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    filled.llms._ready = False
    resp = filled.search("HEL-4040", mode="rerank")
    assert resp.reranker == "identifier" and resp.results
    assert "HYBRIDMEM_LLM is set but unusable" in resp.rerank_note and "OPENAI_API_KEY" in resp.rerank_note


def test_filters_and_top_k_hold_under_rerank(filled: Memory) -> None:
    resp = filled.search("pipeline", mode="rerank", top_k=2, metadata_filter={"env": "staging"})
    assert [r.doc_id for r in resp.results] == ["sched"]
    resp = filled.search("pipeline", mode="rerank", top_k=1)
    assert resp.total_retrieved == 1
