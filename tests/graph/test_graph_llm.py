"""GraphRAG with an LLM: schema-validated batched extraction and summaries over the local provider
test server (real HTTP clients), counted calls with the test double, incremental costs."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from hybridmem import Memory
from hybridmem.errors import LLMError, ValidationError
from hybridmem.graph.extract import LLMExtractor, RuleExtractor
from hybridmem.llm import create_chat_model
from llm_fakes import FAST, FakeLLMServer, ScriptedChatModel

_CHUNK = re.compile(r"^\[([^\]\n]+)\] (.*)$", re.M)


def fake_model(messages: list[dict]) -> str:
    """A deterministic stand-in for a model: answers each GraphRAG prompt by its purpose, using the
    rule extractor for extraction so the graph it describes is real."""
    system, user = messages[0]["content"], messages[-1]["content"]
    if system.startswith("You extract"):
        chunks = []
        for cid, text in _CHUNK.findall(user):
            ents, rels = RuleExtractor(names=False, cooccurrence=False).extract_text(text)
            chunks.append(
                {
                    "chunk_id": cid,
                    "entities": [
                        {"name": e.name, "type": e.type, "description": f"{e.name} as seen in {cid}"} for e in ents
                    ],
                    "relations": [
                        {
                            "source": r.source,
                            "target": r.target,
                            "type": r.type,
                            "description": r.description,
                            "weight": 5,
                        }
                        for r in rels
                    ],
                }
            )
        return json.dumps({"chunks": chunks})
    if system.startswith("You write the report"):
        cids = re.findall(r"^\[([^\]\n]+)\]", user, re.M)
        title = user.split("\n", 1)[0]
        return json.dumps(
            {
                "title": f"LLM {title}",
                "summary": f"Summary of {title}.",
                "importance": 7,
                "chunk_ids": cids[:2] + ["invented_p9"],
            }
        )
    if system.startswith("You answer a corpus-wide"):
        ids = re.findall(r"^\[(L\d+-\d+)\]", user, re.M)
        return json.dumps(
            {"points": [{"community_id": i, "answer": f"point from {i}", "score": 90 - n} for n, i in enumerate(ids)]}
        )
    if system.startswith("You write the final answer"):
        ids = re.findall(r"\[(L\d+-\d+)\]", user)
        return json.dumps(
            {"answer": f"Billing depends on PostgreSQL [{ids[0]}] [L99-9].", "community_ids": ids[:1], "chunk_ids": []}
        )
    raise AssertionError(f"unexpected prompt: {system[:60]}")


def counting_model() -> ScriptedChatModel:
    return ScriptedChatModel([fake_model] * 10_000)


def docs(n: int) -> list[dict]:
    """``n`` small technical documents in a few loose clusters of services."""
    out = []
    for i in range(n):
        g = i % 5
        out.append(
            {
                "id": f"doc-{i}",
                "text": (
                    f"svc{i}-service depends on db-{g}0-01. svc{i}-service calls gw{g}-gateway. "
                    f"HEL-{1000 + g} provoque HTTP 50{g % 4}."
                ),
            }
        )
    return out


@pytest.fixture
def built(tmp_path: Path) -> Iterator[tuple[Memory, ScriptedChatModel]]:
    llm = counting_model()
    m = Memory(tmp_path / "g.db", embedder="hash", auto_embed=False, llm=llm)
    m.add_documents(docs(40))
    m.graph.build(batch_size=1)
    yield m, llm
    m.close()


def test_llm_build_calls_once_per_chunk_and_per_community(built: tuple[Memory, ScriptedChatModel]) -> None:
    m, llm = built
    st = m.graph.status()
    assert st.summarizers == {"scripted:test": st.communities}
    comms = m.graph.communities()
    assert len(llm.seen) == st.chunks_extracted + len(comms)
    assert all(c.title.startswith("LLM Community") for c in comms)
    # the invented chunk id of the model's reply was dropped
    assert all("invented_p9" not in c.chunk_ids for c in comms)
    # typed relations came from the model's JSON
    info = m.graph.show("svc3-service")
    assert {r["type"] for r in info["relations_out"]} >= {"depends_on", "calls"}
    assert info["description"].startswith("svc3-service as seen in")


def test_changing_one_document_costs_changed_communities_plus_its_chunks(
    built: tuple[Memory, ScriptedChatModel],
) -> None:
    m, llm = built
    total = m.graph.status().communities
    llm.seen.clear()
    m.update("doc-7", "svc7-service depends on db-20-01 and uses cache-01.")
    rep = m.graph.update(batch_size=1)
    assert rep.chunks_extracted == 1
    assert rep.llm_calls == len(llm.seen) == rep.chunks_extracted + rep.summaries_made
    assert 0 < rep.summaries_made < total and rep.summaries_reused > 0
    assert m.graph.status().stale_communities == 0


def test_deleting_documents_costs_no_llm_call(built: tuple[Memory, ScriptedChatModel]) -> None:
    m, llm = built
    llm.seen.clear()
    m.delete([f"doc-{i}" for i in range(0, 40, 3)])
    assert m.graph.status().stale_communities > 0
    rep = m.graph.update()
    assert len(llm.seen) == 0 and rep.llm_calls == 0 and rep.summaries_pruned > 0
    assert m.graph.status().stale_communities == 0


def test_extraction_is_batched(tmp_path: Path) -> None:
    llm = counting_model()
    with Memory(tmp_path / "b.db", embedder="hash", auto_embed=False, llm=llm) as m:
        m.add_documents(docs(9))
        rep = m.graph.build(batch_size=4, summarizer="extractive")
        extract_calls = [s for s in llm.seen if s[0]["content"].startswith("You extract")]
        assert rep.chunks_extracted == 9 and len(extract_calls) == math.ceil(9 / 4)
        assert rep.llm_calls == len(extract_calls) and rep.usage is not None
        assert rep.usage.prompt_tokens == 100 * len(extract_calls)  # the double reports 100 per call
        assert m.graph.status().summarizers == {"extractive": rep.communities}


def test_global_answer_with_llm_checks_citations(built: tuple[Memory, ScriptedChatModel]) -> None:
    m, llm = built
    llm.seen.clear()
    ans = m.ask_global("What depends on PostgreSQL?", max_communities=6, map_batch=3)
    assert ans.answerer == "scripted:test"
    assert len(llm.seen) == 2 + 1  # two map calls (6 summaries, 3 per call) and one reduce
    assert ans.usage is not None and ans.usage.calls == 3 and ans.prompt_tokens == 300
    assert "[L99-9]" not in ans.answer and any("L99-9" in n for n in ans.notes)
    assert ans.community_ids and all(c.startswith("L0-") for c in ans.community_ids)


def test_llm_extractor_over_the_provider_test_server(tmp_path: Path) -> None:
    with FakeLLMServer() as server:
        server.responder = lambda seen: fake_model(json.loads(json.dumps(seen.body["messages"])))
        model = create_chat_model("openai:test-model", base_url=f"{server.url}/v1", api_key="k", retry=FAST, timeout=5)
        with Memory(tmp_path / "s.db", embedder="hash", auto_embed=False, llm=model) as m:
            m.add_documents(docs(6))
            rep = m.graph.build(batch_size=3)
        assert rep.extractor == "llm:openai:test-model" and rep.summarizer == "openai:test-model"
        schemas = [r.schema_name for r in server.requests]
        assert schemas.count("LLMGraph") == 2 and schemas.count("CommunityReport") == rep.communities
        assert rep.usage is not None and rep.usage.prompt_tokens == 11 * len(server.requests)  # server usage


def test_invalid_extraction_is_repaired_once_then_fails_clearly(tmp_path: Path) -> None:
    good = fake_model
    llm = ScriptedChatModel(["not json", good] + [good] * 100)
    with Memory(tmp_path / "r.db", embedder="hash", auto_embed=False, llm=llm) as m:
        m.add_documents(docs(2))
        rep = m.graph.build(batch_size=2, summarizer="extractive")
        assert rep.llm_calls == 2 and rep.usage.per_call[1].purpose == "graph:extract:repair"
    bad = ScriptedChatModel(['{"chunks": "nope"}', '{"still": "wrong"}'])
    with Memory(tmp_path / "r2.db", embedder="hash", auto_embed=False, llm=bad) as m:
        m.add_documents(docs(2))
        with pytest.raises(LLMError, match="invalid output"):
            m.graph.build(batch_size=2)
        assert m.graph.status().chunks_extracted == 0  # nothing half-written


def test_llm_choices_without_llm_are_clear_errors(mem: Memory) -> None:
    mem.add("auth-service calls billing-service.", id="x")
    mem.llms.set(None)
    with pytest.raises(ValidationError, match="needs an LLM"):
        mem.graph.build(extractor="llm")
    with pytest.raises(ValidationError, match="needs an LLM"):
        mem.graph.build(summarizer="llm")
    with pytest.raises(ValidationError, match="unknown extractor"):
        mem.graph.build(extractor="magic")
    assert LLMExtractor(counting_model()).name == "llm:scripted:test"
