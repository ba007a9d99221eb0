"""The LangChain adapters (hybridmem.integrations.langchain) against langchain-tests' standard
suites, plus the adapter's own contract: filters, scores, MMR, the embeddings bridge, bad input.

Standard suites (langchain-tests 1.1.9), as last run: VectorStoreIntegrationTests 25 passed,
0 skipped (sync and async, get_by_ids included); RetrieversIntegrationTests 5 passed, 0 skipped,
run twice (``k`` and ``top_k`` as the number-of-results argument). No standard test is skipped,
xfailed or overridden, so no skip needs a reason; the vector store suite's own embeddings
(``DeterministicFakeEmbedding``, 6 dimensions) are the store's embedder (``LangChainEmbedder``),
the retriever suite runs on a Memory with the hash embedder.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("langchain_tests")

from langchain_core.documents import Document  # noqa: E402
from langchain_core.embeddings import DeterministicFakeEmbedding  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from langchain_core.vectorstores import VectorStore  # noqa: E402
from langchain_tests.integration_tests import RetrieversIntegrationTests, VectorStoreIntegrationTests  # noqa: E402

from hybridmem import Memory  # noqa: E402
from hybridmem.errors import FilterError, ValidationError  # noqa: E402
from hybridmem.integrations.langchain import (  # noqa: E402
    HybridMemRetriever,
    HybridMemVectorStore,
    LangChainEmbedder,
)

# the standard suites' async tests are coroutines without a marker of their own
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class TestHybridMemVectorStoreStandard(VectorStoreIntegrationTests):
    @pytest.fixture
    def vectorstore(self, tmp_path: Path) -> Iterator[VectorStore]:  # type: ignore[override]
        store = HybridMemVectorStore(tmp_path / "lc.db", embedding=self.get_embeddings())
        try:
            yield store
        finally:
            store.close()


_CORPUS = [
    ("pg-1", "Increase max_connections to 200 on the billing postgres pool.", {"service": "billing", "sev": 3}),
    ("pg-2", "The billing service connection pool was exhausted during the release.", {"service": "billing", "sev": 2}),
    ("dns-1", "DNS resolution failed for the search cluster after the upgrade.", {"service": "search", "sev": 1}),
    ("cache-1", "Redis cache eviction storm slowed the checkout service.", {"service": "checkout", "sev": 2}),
    ("tls-1", "TLS certificate for the api gateway expired on Sunday.", {"service": "gateway", "sev": 3}),
]


def _filled_memory(path: Path) -> Memory:
    mem = Memory(path, embedder="hash", chunk_size=None)
    mem.add_documents([{"id": i, "text": t, "metadata": m} for i, t, m in _CORPUS])
    mem.wait_for_vectors(30)
    return mem


@pytest.fixture(scope="module")
def shared_memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    mem = _filled_memory(tmp_path_factory.mktemp("lc-retriever") / "r.db")
    try:
        yield mem
    finally:
        mem.close()


class _RetrieverSuite(RetrieversIntegrationTests):
    @pytest.fixture(autouse=True)
    def _memory(self, shared_memory: Memory) -> None:
        self._mem = shared_memory

    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return HybridMemRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"memory": self._mem, "mode": "hybrid"}

    @property
    def retriever_query_example(self) -> str:
        return "billing connection pool"


class TestHybridMemRetrieverStandardK(_RetrieverSuite):
    """The number of results named ``k`` (LangChain's convention)."""


class TestHybridMemRetrieverStandardTopK(_RetrieverSuite):
    """The number of results named ``top_k`` (the query contract's name)."""

    @property
    def num_results_arg_name(self) -> str:
        return "top_k"


# ---------------------------------------------------------------- the adapter's own contract
@pytest.fixture
def store(tmp_path: Path) -> Iterator[HybridMemVectorStore]:
    s = HybridMemVectorStore(tmp_path / "s.db", embedder="hash")
    s.add_texts([t for _, t, _ in _CORPUS], [m for _, _, m in _CORPUS], ids=[i for i, _, _ in _CORPUS])
    try:
        yield s
    finally:
        s.close()


def test_filter_is_a_hybridmem_prefilter(store: HybridMemVectorStore) -> None:
    docs = store.similarity_search("pool", k=5, filter={"service": "billing", "sev": {"$gte": 3}})
    assert [d.id for d in docs] == ["pg-1"]
    docs = store.similarity_search("pool", k=5, filter={"$or": [{"service": "search"}, {"sev": {"$lt": 2}}]})
    assert [d.id for d in docs] == ["dns-1"]


def test_scores_and_modes(store: HybridMemVectorStore) -> None:
    scored = store.similarity_search_with_score("max_connections billing", k=3)
    assert scored[0][0].id == "pg-1"
    assert all(a[1] >= b[1] for a, b in zip(scored, scored[1:]))
    bm25 = store.similarity_search("certificate", k=5, mode="bm25")
    assert [d.id for d in bm25] == ["tls-1"]  # BM25 alone: only the document holding the term
    rel = store.similarity_search_with_relevance_scores("max_connections billing", k=3)
    assert all(0.0 <= s <= 1.0 for _, s in rel)


def test_mmr_and_as_retriever(store: HybridMemVectorStore) -> None:
    docs = store.max_marginal_relevance_search("billing pool", k=2, fetch_k=5)
    assert len(docs) == 2 and len({d.id for d in docs}) == 2
    retriever = store.as_retriever(search_kwargs={"k": 2, "filter": {"service": "billing"}})
    assert {d.id for d in retriever.invoke("pool")} == {"pg-1", "pg-2"}
    mmr = store.as_retriever(search_type="mmr", search_kwargs={"k": 2})
    assert len(mmr.invoke("billing")) == 2
    hybrid = store.as_hybrid_retriever(top_k=1, hybrid_params={"dense_weight": 0.5})
    assert [d.id for d in hybrid.invoke("max_connections")] == ["pg-1"]


def test_retriever_carries_the_contract(shared_memory: Memory) -> None:
    r = HybridMemRetriever(memory=shared_memory, top_k=5, metadata_filter={"service": "billing"}, mode="bm25")
    assert {d.id for d in r.invoke("pool")} == {"pg-1", "pg-2"}
    assert [d.id for d in r.invoke("pool", metadata_filter={"sev": 3}, k=1)] == ["pg-1"]
    r2 = HybridMemRetriever(memory=shared_memory, k=2, search_kwargs={"fetch_k": 10})
    assert len(r2.invoke("certificate expired")) == 2


async def test_async_twins(store: HybridMemVectorStore) -> None:
    ids = await store.aadd_texts(["Kafka consumer lag on the ingest topic."], ids=["kafka-1"])
    assert ids == ["kafka-1"]
    docs = await store.asimilarity_search("kafka consumer lag", k=1)
    assert docs[0].id == "kafka-1"
    assert [d.id for d in await store.aget_by_ids(["kafka-1", "nope"])] == ["kafka-1"]
    await store.adelete(["kafka-1"])
    assert await store.aget_by_ids(["kafka-1"]) == []
    retriever = store.as_hybrid_retriever(top_k=1)
    assert len(await retriever.ainvoke("billing")) == 1


def test_from_texts_and_embeddings_bridge(tmp_path: Path) -> None:
    emb = DeterministicFakeEmbedding(size=12)
    store = HybridMemVectorStore.from_texts(
        ["alpha beta", "gamma delta"], emb, ids=["a", "g"], memory=tmp_path / "f.db"
    )
    try:
        assert store.memory.embedder_name == "langchain:DeterministicFakeEmbedding"
        assert store.memory.embedder.dim == 12
        assert store.similarity_search("gamma delta", k=1)[0].id == "g"
        assert store.embeddings is emb
    finally:
        store.close()
    adapter = LangChainEmbedder(emb)
    rows = adapter.embed_documents(["x", "y"])
    assert rows.dtype == np.float32 and rows.shape == (2, 12)
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0)
    assert np.isclose(np.linalg.norm(adapter.embed_query("x")), 1.0)


# ---------------------------------------------------------------- bad input: the framework's types
def test_invalid_filter_is_a_value_error_with_hybridmem_message(store: HybridMemVectorStore) -> None:
    with pytest.raises(ValueError, match="unknown filter operator '\\$regex'") as info:
        store.similarity_search("pool", filter={"service": {"$regex": "bill.*"}})
    assert isinstance(info.value, FilterError)
    with pytest.raises(FilterError, match="expected a non-empty list"):
        store.as_retriever(search_kwargs={"filter": {"sev": {"$in": []}}}).invoke("pool")


def test_missing_and_mismatched_ids(store: HybridMemVectorStore) -> None:
    assert store.get_by_ids(["no-such-id", "", "pg-1"]) == [
        Document(id="pg-1", page_content=_CORPUS[0][1], metadata=_CORPUS[0][2])
    ]
    store.delete(["no-such-id"])  # unknown ids are ignored, as LangChain expects
    with pytest.raises(ValueError, match="needs the ids"):
        store.delete(None)
    with pytest.raises(ValueError, match="2 ids for 1 texts"):
        store.add_texts(["one"], ids=["a", "b"])
    with pytest.raises(ValueError, match="metadatas for 2 texts"):
        store.add_texts(["one", "two"], metadatas=[{}])
    with pytest.raises(ValidationError, match="invalid id"):
        store.add_texts(["bad id"], ids=["x@@v1"])
    with pytest.raises(ValidationError, match="text must not be empty"):
        store.add_documents([Document(page_content="fine", id="ok-1"), Document(page_content="   ")])
    assert store.get_by_ids(["ok-1"]) == []  # one transaction: nothing of a refused call is stored
    with pytest.raises(ValidationError, match="top_k"):
        store.similarity_search("pool", k=0)
