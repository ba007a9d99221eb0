"""The LangGraph store (hybridmem.integrations.langgraph.HybridMemStore): batch/put/get/search/
list_namespaces, prefixes, filters, TTL, LangGraph's namespace errors; and end to end, LangMem's
memory tools in a LangGraph agent driven by a scripted chat model (no network), on e5 vectors."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.store.base")

from langchain_core.embeddings import DeterministicFakeEmbedding  # noqa: E402
from langgraph.store.base import (  # noqa: E402
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchItem,
    SearchOp,
)

from hybridmem.errors import FilterError, ValidationError  # noqa: E402
from hybridmem.integrations.langgraph import HybridMemStore  # noqa: E402


@pytest.fixture
def store(tmp_path: Path) -> Iterator[HybridMemStore]:
    s = HybridMemStore(tmp_path / "lg.db", embedder="hash", ttl={"omit_expired": True})
    try:
        yield s
    finally:
        s.close()


def _fill(s: HybridMemStore) -> None:
    s.put(("memories", "u1"), "pool", {"content": "billing pool is 200 connections", "kind": "fact", "n": 3})
    s.put(("memories", "u1"), "theme", {"content": "prefers the dark theme", "kind": "pref", "n": 1})
    s.put(("memories", "u2"), "pool", {"content": "billing pool is 50 connections", "kind": "fact", "n": 2})
    s.put(("docs", "runbooks", "pg"), "r1", {"title": "Resize a pool", "body": "raise max_connections"})


def test_put_get_roundtrip_keeps_times(store: HybridMemStore) -> None:
    value = {"content": "x", "nested": {"a": [1, 2, {"b": None}]}, "flag": True}
    store.put(("a", "b"), "k/1 with spaces", value)
    item = store.get(("a", "b"), "k/1 with spaces")
    assert item is not None and item.value == value and item.namespace == ("a", "b") and item.key == "k/1 with spaces"
    created = item.created_at
    time.sleep(0.01)
    store.put(("a", "b"), "k/1 with spaces", {"content": "y"})
    again = store.get(("a", "b"), "k/1 with spaces")
    assert again is not None and again.value == {"content": "y"}
    assert again.created_at == created and again.updated_at > created
    assert store.get(("a",), "b/k/1 with spaces") is None  # no id collision across the namespace/key split
    store.delete(("a", "b"), "k/1 with spaces")
    assert store.get(("a", "b"), "k/1 with spaces") is None


def test_values_metadata_cannot_hold(store: HybridMemStore) -> None:
    odd = {'say "hi"': 1, "content": "quoted key"}  # a key no metadata key can be: the value kept whole
    store.put(("odd",), "k", odd)
    item = store.get(("odd",), "k")
    assert item is not None and item.value == odd
    assert store.search(("odd",), filter={"content": "quoted key"}) == []  # ...and not filterable
    with pytest.raises(ValidationError, match="hybridmem refused the item: .*4096-character limit"):
        store.put(("big",), "k", {"content": "x" * 5000})
    with pytest.raises(ValueError, match="at most 1000"):
        store.search(("odd",), query="x", limit=900, offset=200)


def test_batch_reads_before_writes_last_put_wins(store: HybridMemStore) -> None:
    ns = ("batch",)
    results = store.batch(
        [
            PutOp(ns, "k", {"v": 1}),
            GetOp(ns, "k"),
            PutOp(ns, "k", {"v": 2}),
            SearchOp(ns),
            ListNamespacesOp(),
        ]
    )
    assert results == [None, None, None, [], []]  # reads saw the store before the batch's writes
    item = store.get(ns, "k")
    assert item is not None and item.value == {"v": 2}
    assert asyncio.run(store.abatch([GetOp(ns, "k")]))[0] == item


def test_hybrid_search_prefix_and_scores(store: HybridMemStore) -> None:
    _fill(store)
    hits = store.search(("memories",), query="billing pool connections")
    assert {(h.namespace, h.key) for h in hits[:2]} == {(("memories", "u1"), "pool"), (("memories", "u2"), "pool")}
    assert all(isinstance(h, SearchItem) and h.score is not None and h.score > 0 for h in hits)
    assert all(a.score >= b.score for a, b in zip(hits, hits[1:]))  # type: ignore[operator]
    only_u1 = store.search(("memories", "u1"), query="billing pool")
    assert {h.key for h in only_u1} == {"pool", "theme"} and all(h.namespace == ("memories", "u1") for h in only_u1)
    assert store.search(("memories", "u3"), query="billing") == []
    assert store.search(("memo",), query="billing") == []  # a prefix is whole labels, not characters
    assert store.search((), query="max_connections")[0].key == "r1"
    page = store.search(("memories",), query="billing pool", limit=1, offset=1)
    assert len(page) == 1 and page[0].key == hits[1].key


def test_filters_are_prefilters(store: HybridMemStore) -> None:
    _fill(store)
    facts = store.search(("memories",), query="theme", filter={"kind": "fact"})
    assert {h.namespace[1] for h in facts} == {"u1", "u2"} and all(h.value["kind"] == "fact" for h in facts)
    assert [h.namespace for h in store.search(("memories",), filter={"n": {"$gte": 3}})] == [("memories", "u1")]
    assert {h.key for h in store.search(("memories",), filter={"n": {"$ne": 3}, "kind": {"$eq": "fact"}})} == {"pool"}
    assert len(store.search((), filter={"kind": {"$in": ["fact", "pref"]}})) == 3  # hybridmem's $in too
    with pytest.raises(ValueError, match="nested filters are not supported"):
        store.search(("memories",), filter={"content": {"a": 1}})
    with pytest.raises(FilterError, match="unknown filter operator '\\$regex'"):
        store.search(("memories",), filter={"kind": {"$regex": "f.*"}})


def test_listing_without_query_newest_first_and_paged(store: HybridMemStore) -> None:
    for i in range(12):
        store.put(("list",), f"k{i:02d}", {"i": i})
    keys = [h.key for h in store.search(("list",), limit=20)]
    assert keys == [f"k{i:02d}" for i in range(11, -1, -1)]
    assert [h.key for h in store.search(("list",), limit=3, offset=4)] == ["k07", "k06", "k05"]
    assert all(h.score is None for h in store.search(("list",)))


def test_listing_pages_through_memory_list_past_one_query(store: HybridMemStore) -> None:
    """A listing is Memory.list's keyset pages, not a ranked query: more items than one query
    returns (1,000) come back, each once, newest first; a put again makes an item the newest."""
    store.batch([PutOp(("bulk",), f"k{i:04d}", {"i": i}, index=False) for i in range(1200)])
    store.put(("bulk",), "k0000", {"i": -1}, index=False)
    keys = [h.key for h in store.search(("bulk",), limit=1500)]
    assert len(keys) == len(set(keys)) == 1200
    assert keys[0] == "k0000" and keys[1] == "k1199" and keys[-1] == "k0001"
    tail = store.search(("bulk",), limit=5, offset=1195)
    assert [h.key for h in tail] == ["k0005", "k0004", "k0003", "k0002", "k0001"]


def test_index_config_fields_and_index_false(tmp_path: Path) -> None:
    emb = DeterministicFakeEmbedding(size=16)
    # BM25 alone, so that what is indexed shows (the fake embedding ranks every item for any query)
    s = HybridMemStore(tmp_path / "ix.db", index={"dims": 16, "embed": emb, "fields": ["title"]}, mode="bm25")
    try:
        assert s.memory.embedder_name == "langchain:DeterministicFakeEmbedding" and s.memory.embedder.dim == 16
        s.put(("d",), "1", {"title": "kubernetes upgrade", "body": "zebra"})
        s.put(("d",), "2", {"title": "zebra crossing", "body": "kubernetes"}, index=["body"])
        s.put(("d",), "3", {"title": "kubernetes zebra"}, index=False)
        texts = {k: s.memory.get(f"d/{k}", namespace="langgraph")["chunks"][0]["text"] for k in "12"}
        assert texts == {"1": "kubernetes upgrade", "2": "kubernetes"}  # only the configured fields are the text
        zebra = s.search(("d",), query="zebra")
        assert [(h.key, h.score) for h in zebra] == [("3", None)]  # no indexed text holds it; 3 only fills the page
        ranked = s.search(("d",), query="kubernetes", limit=5)
        assert {h.key for h in ranked[:2]} == {"1", "2"} and all(h.score for h in ranked[:2])
        assert ranked[-1].key == "3" and ranked[-1].score is None
        whole = HybridMemStore(s.memory)  # fields ["$"] by default: the value as JSON, as LangGraph embeds it
        whole.put(("j",), "2", {"b": "two", "a": 1})
        assert s.memory.get("j/2", namespace="langgraph")["chunks"][0]["text"] == '{"a": 1, "b": "two"}'
    finally:
        s.close()


def test_list_namespaces(store: HybridMemStore) -> None:
    _fill(store)
    assert store.list_namespaces() == [("docs", "runbooks", "pg"), ("memories", "u1"), ("memories", "u2")]
    assert store.list_namespaces(prefix=("memories",)) == [("memories", "u1"), ("memories", "u2")]
    assert store.list_namespaces(suffix=("u2",)) == [("memories", "u2")]
    assert store.list_namespaces(prefix=("*", "runbooks")) == [("docs", "runbooks", "pg")]
    assert store.list_namespaces(max_depth=1) == [("docs",), ("memories",)]
    assert store.list_namespaces(limit=1, offset=1) == [("memories", "u1")]
    cond = (MatchCondition("prefix", ("memories",)), MatchCondition("suffix", ("u1",)))
    assert store.batch([ListNamespacesOp(match_conditions=cond)])[0] == [("memories", "u1")]
    store.delete(("memories", "u2"), "pool")  # its last item: the namespace goes with it
    assert store.list_namespaces(prefix=("memories",)) == [("memories", "u1")]


def test_ttl_expiry_refresh_and_sweep(store: HybridMemStore) -> None:
    assert store.supports_ttl
    store.put(("ttl",), "short", {"v": 1}, ttl=0.02)  # 1.2 s
    store.put(("ttl",), "kept", {"v": 2})
    meta = store.memory.get("ttl/short", namespace="langgraph")["metadata"]
    first_expiry = meta["lg.expires_at"]
    time.sleep(0.3)
    assert store.get(("ttl",), "short") is not None  # a read refreshes the TTL...
    refreshed = store.memory.get("ttl/short", namespace="langgraph")["metadata"]["lg.expires_at"]
    assert refreshed > first_expiry
    assert store.get(("ttl",), "short", refresh_ttl=False) is not None  # ...unless told not to
    time.sleep(1.4)
    assert store.get(("ttl",), "short") is None  # omit_expired: hidden before the sweep
    assert [h.key for h in store.search(("ttl",))] == ["kept"]
    assert store.sweep_ttl() == 1
    assert store.memory.stats("langgraph").documents == 2  # "kept" and the namespace's marker
    future = store.start_ttl_sweeper(sweep_interval_minutes=1)
    assert store.stop_ttl_sweeper(timeout=5) and future.result(timeout=5) is None


def test_invalid_namespaces_raise_langgraphs_error(store: HybridMemStore) -> None:
    bad: list[tuple[Any, ...]] = [(), ("langgraph", "x"), ("a.b",), ("",), ("a", 3), ("nul\x00",)]
    for ns in bad:
        with pytest.raises(InvalidNamespaceError):
            store.put(ns, "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError, match="periods"):
        store.search(("a.b",), query="x")
    with pytest.raises(InvalidNamespaceError, match="periods"):
        store.batch([GetOp(("a.b",), "k")])  # a batch called directly is checked too
    with pytest.raises(InvalidNamespaceError, match="Namespace cannot be empty"):
        store.batch([PutOp((), "k", {"v": 1})])
    with pytest.raises(InvalidNamespaceError, match="too long for hybridmem"):
        store.put(("x" * 600,), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError, match="periods"):
        store.list_namespaces(prefix=("a.b",))
    with pytest.raises(ValueError, match="512-character id limit"):
        store.put(("a",), "k" * 600, {"v": 1})


# ---------------------------------------------------------------- end to end: LangMem + a LangGraph agent
def _scripted_model(script: list[Any]) -> Any:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from pydantic import PrivateAttr

    class ScriptedChatModel(BaseChatModel):
        """Replies from a script: an AIMessage with tool calls, or text; ``bind_tools`` keeps it."""

        _turns: Iterator[Any] = PrivateAttr()

        def __init__(self, turns: list[Any]) -> None:
            super().__init__()
            self._turns = iter(turns)

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
            reply = next(self._turns)
            msg = AIMessage(content=reply) if isinstance(reply, str) else reply
            return ChatResult(generations=[ChatGeneration(message=msg)])

    return ScriptedChatModel(script)


def _call(name: str, args: dict[str, Any], n: int) -> Any:
    from langchain_core.messages import AIMessage

    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call_{n}", "type": "tool_call"}])


def _agent(store: HybridMemStore, script: list[Any]) -> Any:
    from langchain.agents import create_agent
    from langmem import create_manage_memory_tool, create_search_memory_tool

    ns = ("memories", "{langgraph_user_id}")
    tools = [create_manage_memory_tool(namespace=ns), create_search_memory_tool(namespace=ns)]
    return create_agent(_scripted_model(script), tools=tools, store=store)


def _search_results(state: dict[str, Any]) -> list[dict[str, Any]]:
    from langchain_core.messages import ToolMessage

    found = [m for m in state["messages"] if isinstance(m, ToolMessage) and m.name == "search_memory"]
    assert found, "the agent ran no search"
    return json.loads(found[-1].content)


@pytest.mark.integration
def test_langmem_tools_in_a_langgraph_agent(tmp_path: Path) -> None:
    pytest.importorskip("langmem")
    pytest.importorskip("langchain.agents")
    store = HybridMemStore(tmp_path / "agent.db", embedder="e5")
    user1 = {"configurable": {"langgraph_user_id": "user-1"}}
    user2 = {"configurable": {"langgraph_user_id": "user-2"}}
    manage = "manage_memory"
    try:
        turn1 = [
            _call(manage, {"content": "my billing service pool is 200 connections", "action": "create"}, 1),
            _call(manage, {"content": "the outage ticket for it is HEL-4040", "action": "create"}, 2),
            _call(manage, {"content": "I prefer answers in French", "action": "create"}, 3),
            "Noted.",
        ]
        _agent(store, turn1).invoke({"messages": [{"role": "user", "content": "remember my pool size"}]}, user1)
        turn1b = [_call(manage, {"content": "my favourite colour is green", "action": "create"}, 4), "Noted."]
        _agent(store, turn1b).invoke({"messages": [{"role": "user", "content": "remember my colour"}]}, user2)
        assert {ns for ns in store.list_namespaces(prefix=("memories",))} == {
            ("memories", "user-1"),
            ("memories", "user-2"),
        }

        # a later turn: recalled by paraphrase (few shared words), with the async tools (abatch)
        question = "how big is the connection pool for billing?"
        turn2 = [_call("search_memory", {"query": question}, 5), "200 connections."]
        state = asyncio.run(_agent(store, turn2).ainvoke({"messages": [{"role": "user", "content": question}]}, user1))
        hits = _search_results(state)
        assert hits[0]["value"]["content"] == "my billing service pool is 200 connections"
        assert hits[0]["namespace"] == ["memories", "user-1"] and hits[0]["score"] > 0
        # the dense leg alone (e5) puts it first too: the recall is not only shared words
        dense = store.memory.search(
            {
                "search_text": "what size is the invoicing DB pool?",
                "mode": "vector",
                "namespace": "langgraph",
                "metadata_filter": {"lg.kind": "item", "lg.ns.1": "user-1"},
                "top_k": 3,
            }
        )
        assert dense.results[0].metadata["v.content"] == "my billing service pool is 200 connections"

        # by an exact identifier
        turn3 = [_call("search_memory", {"query": "HEL-4040"}, 6), "Found it."]
        hits = _search_results(
            _agent(store, turn3).invoke({"messages": [{"role": "user", "content": "HEL-4040?"}]}, user1)
        )
        assert hits[0]["value"]["content"] == "the outage ticket for it is HEL-4040"

        # the second user's namespace never sees the first user's memories
        turn4 = [_call("search_memory", {"query": question}, 7), "I don't know."]
        hits = _search_results(
            _agent(store, turn4).invoke({"messages": [{"role": "user", "content": question}]}, user2)
        )
        assert [h["value"]["content"] for h in hits] == ["my favourite colour is green"]
        assert all(h["namespace"] == ["memories", "user-2"] for h in hits)
    finally:
        store.close()
