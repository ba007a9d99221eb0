"""Grounded answers: citation checks, the extractive answerer, Memory.ask offline / with a scripted
model / with a failing model, and ``hybridmem ask`` as a user runs it (offline, and with
``--llm openai:test-model`` against a local OpenAI-compatible server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hybridmem import Memory
from hybridmem.answer import answer_messages, check_citations, extractive_answer, not_found_message
from hybridmem.errors import LLMError, ValidationError
from hybridmem.models import QueryResult
from llm_fakes import FakeLLMServer, Scripted, ScriptedChatModel, Seen, candidate_ids


def ctx(*items: tuple[str, str]) -> list[QueryResult]:
    return [
        QueryResult(chunk_id=c, rrf_score=0.01, text=t, doc_id=c.rsplit("_p", 1)[0], source=f"{c}.md") for c, t in items
    ]


@pytest.fixture(autouse=True)
def _no_llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HYBRIDMEM_LLM", "HYBRIDMEM_RERANKER", "HYBRIDMEM_LLM_BASE_URL"):
        monkeypatch.delenv(var, raising=False)


# ------------------------------------------------------------------------ citations
def test_invented_citations_are_removed_and_flagged() -> None:
    results = ctx(("pool_p1", "x"), ("cache_p1", "y"))
    text, cited, invented = check_citations(
        "Raise the pool [pool_p1] [doc_99_p3]. Purge it [cache_p1, ghost_p2]. See [the runbook below] too [zzz].",
        ["pool_p1", "imaginary_p1"],
        results,
    )
    assert text == "Raise the pool [pool_p1]. Purge it [cache_p1]. See [the runbook below] too."
    assert cited == ["pool_p1", "cache_p1"]
    assert invented == ["doc_99_p3", "ghost_p2", "zzz", "imaginary_p1"]


def test_the_answer_text_is_otherwise_left_alone() -> None:
    text, cited, _ = check_citations("Relancez la validation ; puis corrigez [a_p1] [b_p9] !", [], ctx(("a_p1", "x")))
    assert text == "Relancez la validation ; puis corrigez [a_p1] !"  # French spacing kept
    text, _, invented = check_citations("[zz_p1] Tout est là [a_p1].", [], ctx(("a_p1", "x")))
    assert text == "Tout est là [a_p1]." and invented == ["zz_p1"]


def test_a_document_id_cites_its_chunk_in_the_context() -> None:
    text, cited, invented = check_citations("See [pool].", [], ctx(("pool_p2", "x"), ("pool_p3", "y")))
    assert text == "See [pool_p2]." and cited == ["pool_p2"] and invented == []


# ------------------------------------------------------------------------ extractive
def test_extractive_answer_cites_the_best_sentences() -> None:
    results = ctx(
        (
            "err-HEL-4040_p1",
            "# HEL-4040 — Invalid pipeline definition\n\nThe validator rejects the file.\n\n"
            "## Resolution\n\n1. Run `helio pipeline validate --no-strict` to list every faulty line.",
        ),
        ("faq_p1", "Pipelines are deployed with helio pipeline deploy. Weather is nice."),
    )
    a = extractive_answer("I get HEL-4040 when I validate my pipeline, what should I do?", results)
    assert a.found and a.answerer == "extractive"
    assert a.cited[0] == "err-HEL-4040_p1"
    assert "[err-HEL-4040_p1]" in a.answer and "Weather" not in a.answer
    assert a.answer.count("[") <= 3  # at most three sentences, each with its id
    assert "#" not in a.answer and "1." not in a.answer.split("[")[0][:3]  # markdown markers dropped


@pytest.mark.parametrize(
    ("question", "needle"),
    [
        ("What is the capital of France?", "not in the memory"),
        ("Quelle est la recette de la tarte tatin ?", "ne se trouve pas dans la mémoire"),
        ("Wie ist das Wetter morgen in Berlin?", "nicht im Speicher"),
        ("¿Cuál es la receta de la paella?", "no está en la memoria"),
        ("今天天气怎么样？", "记忆库中没有"),
    ],
)
def test_not_found_in_the_question_language(question: str, needle: str) -> None:
    results = ctx(("pool_p1", "PostgreSQL connection pool exhaustion causes HTTP 504 timeouts."))
    a = extractive_answer(question, results)
    assert a.found is False and a.cited == [] and needle in a.answer
    assert a.answer == not_found_message(question)


def test_unknown_identifier_is_not_found() -> None:
    results = ctx(("err_p1", "HEL-4040: pipeline definition rejected. Fix the pipeline file."))
    assert extractive_answer("What does HEL-9999 mean?", results).found is False
    assert extractive_answer("What does HEL-4040 mean?", results).found is True


def test_empty_context_is_not_found() -> None:
    assert extractive_answer("anything at all?", []).found is False


# ------------------------------------------------------------------------ Memory.ask
DOCS = {
    "pool": "# Pool\n\nPostgreSQL connection pool exhaustion causes HTTP 504 timeouts on billing-service. "
    "Increase max_connections to 200 to fix it.",
    "cache": "# Cache\n\nPurge the connector cache when a data source returns stale results: helio connector purge.",
    "err": "# HEL-4040\n\nHEL-4040 means the pipeline definition was rejected by strict validation.",
}


@pytest.fixture
def filled(mem: Memory) -> Memory:
    for i, t in DOCS.items():
        mem.add(t, id=i, source=f"docs/{i}.md", metadata={"env": "prod"})
    mem.wait_for_vectors()
    return mem


def test_ask_offline(filled: Memory) -> None:
    a = filled.ask("How many max_connections to fix the HTTP 504 timeouts?")
    assert a.found and a.answerer == "extractive" and a.reranked and a.reranker == "identifier"
    assert a.citations[0].chunk_id.startswith("pool") and a.citations[0].doc_id == "pool"
    assert a.citations[0].source == "docs/pool.md"
    assert "max_connections" in a.answer and f"[{a.citations[0].chunk_id}]" in a.answer
    assert any("no LLM configured" in n and "extractive" in n for n in a.notes)
    assert a.usage is None and a.results and a.results[0].chunk_id == a.citations[0].chunk_id
    assert {c.chunk_id for c in a.citations} <= {r.chunk_id for r in a.results}


def test_ask_offline_not_found_and_filters(filled: Memory) -> None:
    a = filled.ask("Quelle est la capitale de l'Australie ?")
    assert a.found is False and a.citations == [] and "mémoire" in a.answer
    a = filled.ask("HTTP 504 max_connections", metadata_filter={"env": "staging"})
    assert a.results == [] and a.found is False
    a = filled.ask("HTTP 504", metadata_filter={"enviroment": "prod"})  # a key no memory has: nothing found
    assert a.results == [] and a.found is False
    with pytest.raises(ValidationError, match="search_text"):
        filled.ask("   ")


def grounded(messages) -> str:
    ids = [x[1:].split("]")[0] for x in messages[-1]["content"].splitlines() if x.startswith("[")]
    return json.dumps(
        {
            "answer": f"Increase max_connections to 200 [{ids[0]}] [pool_p9].",
            "citations": [ids[0], "made_up_p1"],
            "found": True,
        }
    )


def test_ask_with_an_llm_checks_citations_and_sums_usage(filled: Memory) -> None:
    llm = ScriptedChatModel([lambda m: '{"ids": []}', grounded])
    a = filled.ask("How do I fix HTTP 504 on billing?", llm=llm)
    assert a.answerer == "llm:scripted:test" and a.found
    assert a.reranked and a.reranker == "llm:scripted:test"
    top = a.results[0].chunk_id
    assert a.answer == f"Increase max_connections to 200 [{top}]."  # invented id removed from the text
    assert [c.chunk_id for c in a.citations] == [top]
    assert a.invented_citations == ["pool_p9", "made_up_p1"]
    assert any("removed citation" in n for n in a.notes)
    assert a.usage.calls == 2 and [c.purpose for c in a.usage.per_call] == ["rerank", "answer"]
    assert a.usage.prompt_tokens == 200 and a.usage.completion_tokens == 20
    prompt = llm.seen[1][-1]["content"]
    assert "at most 3 sentences" in prompt and "language of the question" in prompt
    assert "How do I fix HTTP 504 on billing?" in prompt and f"[{top}]" in prompt


def test_ask_without_rerank_makes_one_call(filled: Memory) -> None:
    llm = ScriptedChatModel(['{"answer": "Not in the memory.", "citations": [], "found": false}'])
    a = filled.ask("Who founded the company?", llm=llm, rerank=False, top_k=2)
    assert a.found is False and a.citations == [] and a.answer == "Not in the memory."
    assert a.reranked is False and a.reranker is None and len(a.results) == 2
    assert a.usage.calls == 1 and len(llm.seen) == 1


def test_llm_failure_falls_back_to_extractive(filled: Memory) -> None:
    llm = ScriptedChatModel([lambda m: '{"ids": []}', "prose, not JSON", "more prose"])
    a = filled.ask("HEL-4040 what does it mean?", llm=llm)
    assert a.answerer == "extractive" and a.found and a.citations[0].doc_id == "err"
    assert any("LLM answer failed" in n and "invalid output after one repair attempt" in n for n in a.notes)
    assert a.usage.calls == 3  # rerank + answer + its repair, all accounted for


def test_ungrounded_llm_answer_is_flagged(filled: Memory) -> None:
    llm = ScriptedChatModel(['{"answer": "Reboot everything.", "citations": [], "found": true}'])
    a = filled.ask("How do I fix HTTP 504?", llm=llm, rerank=False)
    assert a.citations == [] and any("ungrounded" in n for n in a.notes)


def test_ask_llm_argument(filled: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(LLMError, match="OPENAI_API_KEY"):
        filled.ask("x", llm="openai:gpt-4o-mini")  # an explicit model with no key: an error, not a silent fallback
    with pytest.raises(ValidationError, match="unknown LLM"):
        filled.ask("x", llm="gpt-4o-mini")
    filled.llms.set(ScriptedChatModel([]))
    a = filled.ask("HTTP 504", llm="none")  # switches the memory's model off for this call
    assert a.answerer == "extractive" and a.usage is None


def test_answer_prompt_truncates_long_chunks() -> None:
    msgs = answer_messages("q?", ctx(("big_p1", "word " * 2000)))
    assert len(msgs[-1]["content"]) < 2500 and "…" in msgs[-1]["content"]


def test_async_ask(filled: Memory) -> None:
    import asyncio

    a = asyncio.run(filled.aask("HEL-4040?"))
    assert a.found and a.citations[0].doc_id == "err"


# ------------------------------------------------------------------------ CLI
def run(
    db: Path, *args: str, env: dict[str, str] | None = None, embedder: str | None = "hash"
) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "hybridmem.cli", "--db", str(db)] + (["--embedder", embedder] if embedder else [])
    base = {k: v for k, v in os.environ.items() if not k.startswith(("HYBRIDMEM_LLM", "OPENAI_"))}
    return subprocess.run(
        cmd + list(args), capture_output=True, text=True, timeout=120, env={**base, "COLUMNS": "200", **(env or {})}
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    docs = tmp_path_factory.mktemp("docs")
    for name, text in DOCS.items():
        (docs / f"{name}.md").write_text(text)
    db = docs.parent / "answer.db"
    r = run(db, "ingest", str(docs), "--meta", "environment=production", "--wait")
    assert r.returncode == 0, r.stderr
    return db


def test_cli_ask_offline(store: Path) -> None:
    r = run(store, "ask", "How many max_connections for HTTP 504?")
    assert r.returncode == 0, r.stderr
    assert "pool_p1]" in r.stdout  # directory ingest: ids are <dir>/pool_p1
    assert "sources" in r.stdout and "answerer: extractive" in r.stdout and "no LLM configured" in r.stdout
    r = run(
        store, "ask", "How many max_connections for HTTP 504?", "--json", "--filter", '{"environment": "production"}'
    )
    data = json.loads(r.stdout)
    assert data["found"] and data["citations"][0]["doc_id"].endswith("/pool") and data["answerer"] == "extractive"
    r = run(store, "ask", "capitale du Pérou ?", "--filter", "environment=production")
    assert r.returncode == 0 and "ne se trouve pas" in r.stdout and "closest passages" in r.stdout


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["ask", "x", "--llm", "gpt-4o"], 2, "unknown LLM"),
        (["ask", "x", "--llm", "openai:gpt-4o-mini"], 8, "OPENAI_API_KEY"),
        (["ask", "   "], 2, "search_text"),
        (["ask", "x", "--filter", "{bad"], 2, "--filter"),
        (["ask", "x", "--reranker", "magic"], 2, "reranker"),
        (["search", "x", "--mode", "rerank", "--llm", "nope:x"], 2, "unknown LLM"),
    ],
)
def test_cli_errors_are_clear(store: Path, args: list[str], code: int, needle: str) -> None:
    r = run(store, *args)
    assert r.returncode == code, (r.stdout, r.stderr)
    assert needle in r.stderr and "Traceback" not in r.stderr


def fake_model(seen: Seen) -> str:
    ids = candidate_ids(seen)
    if seen.schema_name == "RankedIds":
        return json.dumps({"ids": ids[::-1]})
    return json.dumps(
        {"answer": f"Set max_connections to 200 [{ids[0]}] [invented_p7].", "citations": [ids[0]], "found": True}
    )


@pytest.fixture
def llm_server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as s:
        s.responder = fake_model
        yield s


def test_cli_ask_with_an_openai_compatible_server(store: Path, llm_server: FakeLLMServer) -> None:
    env = {"HYBRIDMEM_LLM_BASE_URL": f"{llm_server.url}/v1"}
    r = run(store, "ask", "How do I fix HTTP 504 on billing?", "--llm", "openai:test-model", "--json", env=env)
    assert r.returncode == 0, r.stderr
    a = json.loads(r.stdout)
    assert a["answerer"] == "llm:openai:test-model" and a["reranker"] == "llm:openai:test-model" and a["reranked"]
    first = a["results"][0]["chunk_id"]
    assert a["answer"] == f"Set max_connections to 200 [{first}]."
    assert [c["chunk_id"] for c in a["citations"]] == [first] and a["invented_citations"] == ["invented_p7"]
    assert a["usage"]["calls"] == 2 and a["usage"]["prompt_tokens"] == 22 and a["usage"]["completion_tokens"] == 14
    assert [s.schema_name for s in llm_server.requests] == ["RankedIds", "GroundedAnswer"]
    assert all(s.body["model"] == "test-model" for s in llm_server.requests)
    # the reranker's reversed order is the answer's context order
    assert candidate_ids(llm_server.requests[1])[0] == candidate_ids(llm_server.requests[0])[-1]

    r = run(store, "ask", "How do I fix HTTP 504 on billing?", "--llm", "openai:test-model", "--no-rerank", env=env)
    assert r.returncode == 0, r.stderr
    assert "Set max_connections to 200" in r.stdout and "sources" in r.stdout
    assert "removed invented citations: invented_p7" in r.stdout
    assert "usage: 1 LLM call (1 HTTP request), 11 prompt + 7 completion tokens" in r.stdout
    assert len(llm_server.requests) == 3


def test_cli_search_rerank_with_llm_and_env(store: Path, llm_server: FakeLLMServer) -> None:
    env = {"HYBRIDMEM_LLM_BASE_URL": f"{llm_server.url}/v1", "HYBRIDMEM_LLM": "openai:test-model"}
    fused = json.loads(run(store, "search", "pipeline pool cache", "--json", "--top-k", "3").stdout)
    r = run(store, "search", "pipeline pool cache", "--mode", "rerank", "--json", "--top-k", "3", env=env)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["mode"] == "rerank" and data["reranked"] and data["reranker"] == "llm:openai:test-model"
    assert [x["chunk_id"] for x in data["results"]] == [x["chunk_id"] for x in fused["results"]][::-1]
    assert data["usage"]["calls"] == 1
    r = run(store, "search", "HTTP 504", "--rerank", "--llm", "none", env=env)  # --llm none beats the env
    assert r.returncode == 0 and "reranked by identifier" in r.stdout and len(llm_server.requests) == 1


def test_cli_rerank_failure_is_reported_not_fatal(store: Path, llm_server: FakeLLMServer) -> None:
    llm_server.script = [Scripted(status=400, body={"error": {"message": "context length exceeded"}})]
    env = {"HYBRIDMEM_LLM_BASE_URL": f"{llm_server.url}/v1"}
    r = run(store, "search", "HTTP 504", "--mode", "rerank", "--llm", "openai:test-model", env=env)
    assert r.returncode == 0, r.stderr
    assert "NOT reranked (fused order)" in r.stdout and "context length exceeded" in r.stdout


@pytest.mark.integration
def test_ask_on_the_demo_memory_offline(tmp_path: Path) -> None:
    """After `hybridmem demo` (real e5 weights), `ask` with no LLM cites err-HEL-4040."""
    db = tmp_path / "demo.db"
    r = subprocess.run(
        [sys.executable, "-m", "hybridmem.cli", "demo", "--demo-db", str(db)],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    r = run(db, "ask", "J'obtiens HEL-4040, que dois-je faire ?", "--json", embedder=None)
    assert r.returncode == 0, r.stderr
    a = json.loads(r.stdout)
    assert a["found"] and a["answerer"] == "extractive" and a["reranker"] == "identifier"
    assert a["citations"] and a["citations"][0]["doc_id"] == "err-HEL-4040"
    assert "[err-HEL-4040_p" in a["answer"]


def test_ask_shows_each_memorys_time_and_its_neighbouring_turns(tmp_path: Path) -> None:
    chat = [
        {"role": "user", "name": "Ana", "content": "Did the billing pool move?", "timestamp": "2023-05-08T13:55:00Z"},
        {"role": "user", "name": "Bo", "content": "Yes, we moved it yesterday.", "timestamp": "2023-05-08T13:56:00Z"},
        {"role": "user", "name": "Ana", "content": "Great, thanks!", "timestamp": "2023-05-08T13:57:00Z"},
    ]
    answer = json.dumps({"answer": "On 7 May 2023 [s1:1_p1].", "citations": ["s1:1_p1"], "found": True})
    with Memory(tmp_path / "c.db", embedder="hash", auto_embed=False) as m:
        m.add_messages(chat, session_id="s1", user_id="u1")
        m.add_messages([{"role": "user", "content": "Bo moved the billing pool too."}], session_id="s2", user_id="u2")
        llm = ScriptedChatModel([lambda msgs: answer])
        a = m.ask(
            "When did Bo move the billing pool?",
            llm=llm,
            rerank=False,
            top_k=1,
            user_id="u1",
            context_window={"before": 1, "after": 1},
        )
        assert a.found and [c.chunk_id for c in a.citations] == ["s1:1_p1"]
        prompt = llm.seen[0][-1]["content"]
        assert "[s1:1_p1] (2023-05-08T13:56:00.000Z)\nBo: Yes, we moved it yesterday." in prompt
        assert "  before: (2023-05-08T13:55:00.000Z) Ana: Did the billing pool move?" in prompt
        assert "  after: (2023-05-08T13:57:00.000Z) Ana: Great, thanks!" in prompt
        assert "s2" not in prompt  # the scope is a pre-filter of the answer's retrieval too
        with pytest.raises(ValidationError) as e:
            m.ask("When?", session_id="nope")
        assert e.value.field == "session_id"
        with pytest.raises(ValidationError):
            m.ask("When?", bogus_field=1)
