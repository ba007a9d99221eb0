"""The LlamaIndex adapters (hybridmem.integrations.llamaindex): a ``VectorStoreIndex`` built on
``HybridMemVectorStore`` and queried through ``index.as_retriever`` in each mode, with metadata
filters and deletes; the standalone ``HybridMemRetriever``; bad input; one paraphrase on real e5
weights. (llama-index-core ships no standard vector-store test suite to run: these are ours.)"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import IndexNode, NodeRelationship, NodeWithScore, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)

from hybridmem import Memory
from hybridmem.errors import EmbedderError, EmbedderMismatchError, FilterError, ValidationError
from hybridmem.integrations.llamaindex import (
    REF_DOC_ID,
    HybridMemEmbedding,
    HybridMemRetriever,
    HybridMemVectorStore,
    LlamaIndexEmbedder,
    to_metadata_filter,
)

DOCS = [
    ("pg", "PostgreSQL connection pool exhaustion causes HTTP 504 timeouts.", {"env": "prod", "sev": 3, "team": "db"}),
    ("stg", "The staging connection pool is 20 connections.", {"env": "staging", "sev": 1, "team": "db"}),
    ("kafka", "Kafka consumer lag alert fires at 10k messages.", {"env": "prod", "sev": 2, "team": "stream"}),
    ("dns", "DNS resolution failures: check the resolver cache.", {"env": "dev", "sev": 4}),
]


def _filters(*conds: tuple[str, FilterOperator, object], condition: str = "and") -> MetadataFilters:
    return MetadataFilters(
        filters=[MetadataFilter(key=k, operator=op, value=v) for k, op, v in conds],
        condition=FilterCondition(condition),
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[HybridMemVectorStore]:
    s = HybridMemVectorStore(path=tmp_path / "li.db", embedder="hash")
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def index(store: HybridMemVectorStore) -> VectorStoreIndex:
    docs = [Document(text=t, metadata=m, id_=i) for i, t, m in DOCS]
    ctx = StorageContext.from_defaults(vector_store=store)
    return VectorStoreIndex.from_documents(docs, storage_context=ctx, embed_model=HybridMemEmbedding(store))


def _refs(nodes: list[NodeWithScore]) -> list[str | None]:
    return [n.node.ref_doc_id for n in nodes]


# ---------------------------------------------------------------- the index, each mode
@pytest.mark.parametrize("mode", ["default", "text_search", "sparse", "hybrid"])
def test_index_retrieves_in_each_mode(index: VectorStoreIndex, mode: str) -> None:
    hits = index.as_retriever(vector_store_query_mode=mode, similarity_top_k=2).retrieve("postgres pool 504 timeouts")
    assert _refs(hits)[0] == "pg" and len(hits) == 2
    assert all(isinstance(h.node, TextNode) and h.score is not None for h in hits)
    assert hits[0].score >= hits[1].score
    top = hits[0].node
    assert top.get_content() == DOCS[0][1] and top.metadata == DOCS[0][2]  # the node as it went in
    assert REF_DOC_ID not in top.metadata and "_node_content" not in top.metadata


def test_query_modes_map_to_the_contract(store: HybridMemVectorStore, index: VectorStoreIndex) -> None:
    mem = store.client
    for li_mode, hm_mode, score in (("default", "vector", "dense"), ("text_search", "bm25", "bm25")):
        res = store.query(
            VectorStoreQuery(query_str="kafka lag", similarity_top_k=3, mode=VectorStoreQueryMode(li_mode))
        )
        ref = mem.search({"search_text": "kafka lag", "mode": hm_mode, "top_k": 3})
        assert res.ids and len(res.ids) == len(ref.results)
        assert [n.ref_doc_id for n in res.nodes or []] == [r.metadata[REF_DOC_ID] for r in ref.results]
        assert res.similarities == pytest.approx([r.scores[score] for r in ref.results], abs=1e-4)
    res = store.query(VectorStoreQuery(query_str="kafka lag", similarity_top_k=3, mode=VectorStoreQueryMode.HYBRID))
    ref = mem.search({"search_text": "kafka lag", "top_k": 3})
    assert res.similarities == pytest.approx([r.rrf_score for r in ref.results], abs=1e-4)  # RRF in hybrid


def test_alpha_maps_to_the_leg_weights(store: HybridMemVectorStore, index: VectorStoreIndex) -> None:
    def order(**kw: object) -> list[str | None]:
        q = VectorStoreQuery(query_str="connection pool alert", similarity_top_k=4, mode=VectorStoreQueryMode.HYBRID)
        for k, v in kw.items():
            setattr(q, k, v)
        return [n.ref_doc_id for n in store.query(q).nodes or []]

    def plain(mode: str) -> list[str | None]:
        q = VectorStoreQuery(query_str="connection pool alert", similarity_top_k=4, mode=VectorStoreQueryMode(mode))
        return [n.ref_doc_id for n in store.query(q).nodes or []]

    bm25, dense = plain("text_search"), plain("default")
    assert order(alpha=0.0) == bm25  # alpha 0: the BM25 leg alone
    assert order(alpha=1.0) == dense[: len(order(alpha=1.0))]  # alpha 1: the dense leg alone
    with pytest.raises(ValidationError, match="alpha must be between 0"):
        order(alpha=1.5)
    # hybrid_top_k is the number returned, sparse_top_k deepens the legs
    assert len(order(hybrid_top_k=1, sparse_top_k=4)) == 1


# ---------------------------------------------------------------- filters
FILTER_CASES = [
    (_filters(("env", FilterOperator.EQ, "prod")), {"pg", "kafka"}),
    (_filters(("env", FilterOperator.NE, "prod")), {"stg", "dns"}),
    (_filters(("sev", FilterOperator.GT, 2)), {"pg", "dns"}),
    (_filters(("sev", FilterOperator.GTE, 2)), {"pg", "kafka", "dns"}),
    (_filters(("sev", FilterOperator.LT, 2)), {"stg"}),
    (_filters(("sev", FilterOperator.LTE, 2)), {"stg", "kafka"}),
    (_filters(("team", FilterOperator.IN, ["db", "web"])), {"pg", "stg"}),
    (_filters(("team", FilterOperator.NIN, ["db"])), {"kafka", "dns"}),  # a node without the key matches nin
    (_filters(("env", FilterOperator.EQ, "prod"), ("sev", FilterOperator.GTE, 3)), {"pg"}),
    (
        _filters(("env", FilterOperator.EQ, "dev"), ("team", FilterOperator.EQ, "stream"), condition="or"),
        {"dns", "kafka"},
    ),
    (
        MetadataFilters(
            filters=[
                _filters(("env", FilterOperator.EQ, "staging"), ("sev", FilterOperator.GTE, 4), condition="or"),
                MetadataFilter(key="team", operator=FilterOperator.EQ, value="db"),
            ]
        ),
        {"stg"},
    ),
]


@pytest.mark.parametrize(("filters", "expected"), FILTER_CASES)
def test_index_filters(index: VectorStoreIndex, filters: MetadataFilters, expected: set[str]) -> None:
    for mode in ("hybrid", "default", "text_search"):
        r = index.as_retriever(vector_store_query_mode=mode, similarity_top_k=10, filters=filters)
        hits = r.retrieve("pool connections alert dns resolver timeouts lag")
        assert set(_refs(hits)) <= expected, mode
        if mode == "default":  # the dense leg ranks every node the filter allows
            assert set(_refs(hits)) == expected


def test_filter_translation() -> None:
    nested = MetadataFilters(
        filters=[
            MetadataFilter(key="a", value=1),
            MetadataFilters(
                filters=[
                    MetadataFilter(key="b", operator=FilterOperator.IN, value=["x", "y"]),
                    MetadataFilter(key="c", operator=FilterOperator.LT, value=2.5),
                ],
                condition=FilterCondition.OR,
            ),
        ]
    )
    assert to_metadata_filter(nested) == {
        "$and": [{"a": {"$eq": 1}}, {"$or": [{"b": {"$in": ["x", "y"]}}, {"c": {"$lt": 2.5}}]}]
    }
    assert to_metadata_filter(None) == {} and to_metadata_filter(MetadataFilters(filters=[])) == {}
    assert to_metadata_filter(_filters(("k", FilterOperator.NE, "v"))) == {"k": {"$ne": "v"}}
    # an empty group matches everything: dropped from "and", and it makes an "or" match everything
    empty = MetadataFilters(filters=[])
    assert to_metadata_filter(MetadataFilters(filters=[empty, MetadataFilter(key="a", value=1)])) == {"a": {"$eq": 1}}
    either = MetadataFilters(filters=[empty, MetadataFilter(key="a", value=1)], condition=FilterCondition.OR)
    assert to_metadata_filter(either) == {}


def test_doc_ids_and_store_wide_filter(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder="hash", chunk_size=None) as mem:
        store = HybridMemVectorStore(mem, metadata_filter={"env": {"$ne": "dev"}})
        ctx = StorageContext.from_defaults(vector_store=store)
        docs = [Document(text=t, metadata=m, id_=i) for i, t, m in DOCS]
        index = VectorStoreIndex.from_documents(docs, storage_context=ctx, embed_model=HybridMemEmbedding(mem))
        hits = index.as_retriever(similarity_top_k=10).retrieve("dns resolver pool")
        assert set(_refs(hits)) == {"pg", "stg", "kafka"}  # the store's own filter: never dev
        hits = index.as_retriever(similarity_top_k=10, doc_ids=["pg", "dns"]).retrieve("dns resolver pool")
        assert _refs(hits) == ["pg"]


# ---------------------------------------------------------------- writes, deletes, reads
def test_delete_ref_doc_removes_every_node_of_the_document(store: HybridMemVectorStore) -> None:
    long = " ".join(f"Sentence {i} about connection pools and retries." for i in range(60))
    docs = [Document(text=long, id_="long", metadata={"env": "prod"}), Document(text=DOCS[2][1], id_="kafka")]
    ctx = StorageContext.from_defaults(vector_store=store)
    index = VectorStoreIndex.from_documents(
        docs,
        storage_context=ctx,
        embed_model=HybridMemEmbedding(store),
        transformations=[SentenceSplitter(chunk_size=64, chunk_overlap=8)],
    )
    nodes = store.get_nodes(filters=_filters((REF_DOC_ID, FilterOperator.EQ, "long")))
    assert len(nodes) > 3 and all(n.ref_doc_id == "long" for n in nodes)
    assert store.client.stats().documents == len(nodes) + 1  # one hybridmem document per node
    index.delete_ref_doc("long")
    hits = index.as_retriever(vector_store_query_mode="text_search", similarity_top_k=10).retrieve("connection pools")
    assert "long" not in _refs(hits)
    assert store.client.stats().documents == 1 and _refs(index.as_retriever().retrieve("kafka lag")) == ["kafka"]


def test_nodes_round_trip_and_node_operations(store: HybridMemVectorStore) -> None:
    a = TextNode(
        id_="n-a",
        text="Rotate the API keys every Monday.",
        metadata={"team": "sec", "ref_doc_id": "doc-1", "rank": 2},
        excluded_llm_metadata_keys=["rank"],
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id="doc-1")},
        start_char_idx=0,
        end_char_idx=33,
    )
    b = TextNode(id_="n-b", text="Backups run nightly at 02:00.", metadata={"team": "ops"})
    assert store.add([a, b]) == ["n-a", "n-b"]
    got = store.get_nodes(node_ids=["n-b", "missing", "n-a"])
    assert [n.node_id for n in got] == ["n-b", "n-a"]
    back = got[1]
    assert back.get_content() == a.text and back.metadata == a.metadata and back.ref_doc_id == "doc-1"
    assert back.excluded_llm_metadata_keys == ["rank"] and (back.start_char_idx, back.end_char_idx) == (0, 33)
    assert got[0].ref_doc_id is None and got[0].metadata == {"team": "ops"}
    assert [n.node_id for n in store.get_nodes(filters=_filters(("team", FilterOperator.EQ, "ops")))] == ["n-b"]
    assert store.add([a]) == ["n-a"] and store.client.stats().documents == 2  # same node again: a no-op
    store.delete_nodes(filters=_filters(("team", FilterOperator.EQ, "sec")))
    assert [n.node_id for n in store.get_nodes(node_ids=["n-a", "n-b"])] == ["n-b"]
    store.add([a])
    store.delete_nodes(node_ids=["n-a", "n-b"], filters=_filters(("team", FilterOperator.EQ, "ops")))
    assert [n.node_id for n in store.get_nodes(node_ids=["n-a", "n-b"])] == ["n-a"]
    store.delete_nodes(node_ids=["n-a"])
    assert store.get_nodes(node_ids=["n-a"]) == []
    store.add([a, b])
    store.clear()
    assert store.client.stats().documents == 0


def test_node_classes_round_trip(store: HybridMemVectorStore) -> None:
    store.add(
        [
            Document(text="A whole document.", id_="D", metadata={"k": 1}),
            IndexNode(text="a pointer", index_id="ix", id_="I"),
        ]
    )
    doc, ptr = store.get_nodes(node_ids=["D", "I"])
    assert type(doc) is Document and doc.get_content() == "A whole document." and doc.metadata == {"k": 1}
    assert type(ptr) is IndexNode and ptr.index_id == "ix" and ptr.get_content() == "a pointer"


def test_namespaces_keep_stores_apart(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder="hash", chunk_size=None) as mem:
        one, two = HybridMemVectorStore(mem, namespace="one"), HybridMemVectorStore(mem, namespace="two")
        one.add([TextNode(id_="x", text="shared words here")])
        two.add([TextNode(id_="y", text="shared words here")])
        q = VectorStoreQuery(query_str="shared words", similarity_top_k=5)
        assert one.query(q).ids == ["x"] and two.query(q).ids == ["y"]
        two.clear()
        assert one.query(q).ids == ["x"] and two.query(q).ids == []


def test_async_twins(store: HybridMemVectorStore) -> None:
    async def run() -> None:
        await store.async_add([TextNode(id_="a1", text="Async writes land too.", metadata={"k": 1})])
        res = await store.aquery(VectorStoreQuery(query_str="async writes", mode=VectorStoreQueryMode.HYBRID))
        assert res.ids == ["a1"]
        assert [n.node_id for n in await store.aget_nodes(node_ids=["a1"])] == ["a1"]
        hits = await HybridMemRetriever(store, top_k=1).aretrieve("async writes")
        assert [h.node.node_id for h in hits] == ["a1"]
        await store.adelete_nodes(node_ids=["a1"])
        assert await store.aget_nodes(node_ids=["a1"]) == []
        await store.async_add([TextNode(id_="a2", text="Again.", relationships={"1": RelatedNodeInfo(node_id="r")})])
        await store.adelete("r")
        assert (
            await store.aquery(VectorStoreQuery(query_str="again", mode=VectorStoreQueryMode.TEXT_SEARCH))
        ).ids == []
        await store.async_add([TextNode(id_="a3", text="Once more.")])
        await store.aclear()
        assert store.client.stats().documents == 0

    asyncio.run(run())


def test_mock_embedding_and_skipped_document_vectors(tmp_path: Path) -> None:
    """The index's embed model only has to have the store's dimension; ``skip_documents`` leaves the
    nodes for the store to embed once."""
    store = HybridMemVectorStore(path=tmp_path / "m.db", embedder="hash")
    try:
        docs = [Document(text=t, metadata=m, id_=i) for i, t, m in DOCS]
        for embed_model in (MockEmbedding(embed_dim=store.dim), HybridMemEmbedding(store, skip_documents=True)):
            ctx = StorageContext.from_defaults(vector_store=store)
            index = VectorStoreIndex.from_documents(docs, storage_context=ctx, embed_model=embed_model)
            assert _refs(index.as_retriever(similarity_top_k=1).retrieve("kafka consumer lag")) == ["kafka"]
        assert HybridMemEmbedding(store, skip_documents=True).get_text_embedding("x") == []
        assert len(HybridMemEmbedding(store).get_query_embedding("x")) == store.dim
    finally:
        store.close()


def test_llamaindex_embed_model_inside_hybridmem(tmp_path: Path) -> None:
    embedder = LlamaIndexEmbedder(MockEmbedding(embed_dim=16))
    assert embedder.name == "llamaindex:MockEmbedding:unknown" and embedder.dim == 16
    with Memory(tmp_path / "m.db", embedder=embedder, chunk_size=None) as mem:
        store = HybridMemVectorStore(mem)
        store.add([TextNode(id_="t", text="Vectors from a LlamaIndex model.")])
        assert mem.stats().embedder == embedder.name and mem.stats().vectors == 1
        assert store.query(VectorStoreQuery(query_str="llamaindex vectors")).ids == ["t"]
    with pytest.raises(EmbedderMismatchError):  # the store recorded that model: another one is refused
        Memory(tmp_path / "m.db", embedder="hash")


# ---------------------------------------------------------------- the standalone retriever
def test_standalone_retriever_over_hybridmem_memories(mem: Memory) -> None:
    mem.add("PostgreSQL pool exhaustion: raise max_connections to 200.", id="pg", metadata={"env": "prod", "sev": 3})
    mem.add("Staging pool is 20 connections.", id="stg", metadata={"env": "staging", "sev": 1})
    mem.wait_for_vectors()
    weights = {"dense_weight": 0.6, "sparse_weight": 0.4}
    hits = HybridMemRetriever(mem, top_k=2, hybrid_params=weights).retrieve("postgres pool max_connections")
    assert [h.node.node_id for h in hits] == ["pg_p1", "stg_p1"]  # a memory's chunk is a node
    assert hits[0].node.ref_doc_id == "pg" and hits[0].node.metadata == {"env": "prod", "sev": 3}
    assert hits[0].score == pytest.approx(
        mem.search("postgres pool max_connections", top_k=2, **weights).results[0].rrf_score, abs=1e-4
    )
    for flt in ({"sev": {"$lt": 2}}, _filters(("sev", FilterOperator.LT, 2))):
        for mode in ("hybrid", "bm25", "vector", "rerank"):
            hits = HybridMemRetriever(mem, mode=mode, metadata_filter=flt).retrieve("pool connections")
            assert [h.node.ref_doc_id for h in hits] == ["stg"], mode
    fetched = HybridMemRetriever(mem, top_k=1, search_kwargs={"fetch_k": 50}).retrieve("pool")
    assert len(fetched) == 1
    with pytest.raises(ValidationError, match="top_k"):
        HybridMemRetriever(mem, top_k=0).retrieve("pool")
    with pytest.raises(ValidationError, match="not_a_field|Extra inputs"):
        HybridMemRetriever(mem, search_kwargs={"not_a_field": 1}).retrieve("pool")


def test_retriever_takes_the_store_settings(store: HybridMemVectorStore) -> None:
    store.add([TextNode(id_="p", text="Pool size 10.", metadata={"env": "prod"})])
    other = HybridMemVectorStore(store.client, namespace="elsewhere")
    other.add([TextNode(id_="q", text="Pool size 99.", metadata={"env": "prod"})])
    assert [h.node.node_id for h in HybridMemRetriever(store).retrieve("pool size")] == ["p"]
    assert [h.node.node_id for h in HybridMemRetriever(other).retrieve("pool size")] == ["q"]
    scoped = HybridMemVectorStore(store.client, metadata_filter={"env": "dev"})
    assert HybridMemRetriever(scoped).retrieve("pool size") == []


# ---------------------------------------------------------------- bad input: clear errors
@pytest.mark.parametrize(
    ("operator", "value"),
    [
        (FilterOperator.CONTAINS, "x"),
        (FilterOperator.ANY, ["x"]),
        (FilterOperator.ALL, ["x"]),
        (FilterOperator.TEXT_MATCH, "x"),
        (FilterOperator.TEXT_MATCH_INSENSITIVE, "x"),
        (FilterOperator.IS_EMPTY, None),
    ],
)
def test_unsupported_operator_is_a_clear_error(
    index: VectorStoreIndex, operator: FilterOperator, value: object
) -> None:
    r = index.as_retriever(filters=_filters(("team", operator, value)))
    with pytest.raises(
        FilterError, match=rf"operator '{operator.value}' \(key 'team'\) is not supported.*supported: =="
    ):
        r.retrieve("pool")


def test_bad_input_errors(store: HybridMemVectorStore, index: VectorStoreIndex) -> None:
    with pytest.raises(FilterError, match="condition 'not' is not supported"):
        to_metadata_filter(_filters(("env", FilterOperator.EQ, "prod"), condition="not"))
    with pytest.raises(FilterError, match="needs a list"):
        to_metadata_filter(_filters(("env", FilterOperator.IN, "prod")))
    with pytest.raises(FilterError):  # hybridmem's own checks still apply (a key with a quote)
        index.as_retriever(filters=_filters(('bad"key', FilterOperator.EQ, "x"))).retrieve("pool")
    with pytest.raises(ValidationError, match="query mode 'mmr' is not supported"):
        index.as_retriever(vector_store_query_mode="mmr").retrieve("pool")
    with pytest.raises(ValidationError, match="query_str"):
        store.query(VectorStoreQuery(query_embedding=[0.1] * store.dim))
    with pytest.raises(EmbedderError, match="the query has an embedding of dimension 3"):
        store.query(VectorStoreQuery(query_str="pool", query_embedding=[0.1, 0.2, 0.3]))
    with pytest.raises(ValidationError, match="reserved|store's own"):
        store.add([TextNode(text="x", metadata={"_node_content": "mine"})])
    with pytest.raises(ValidationError, match="text must not be empty"):
        store.add([TextNode(text="   ")])
    with pytest.raises(ValidationError, match="needs a Memory or the path"):
        HybridMemVectorStore()


def test_wrong_embedding_dimension_is_a_clear_error(store: HybridMemVectorStore) -> None:
    ctx = StorageContext.from_defaults(vector_store=store)
    with pytest.raises(EmbedderError, match=rf"dimension 8, but this hybridmem store embeds with a {store.dim}-dim"):
        VectorStoreIndex.from_documents(
            [Document(text="x y z")], storage_context=ctx, embed_model=MockEmbedding(embed_dim=8)
        )
    assert store.client.stats().documents == 0  # nothing written


# ---------------------------------------------------------------- real weights
@pytest.mark.integration
def test_e5_hybrid_finds_a_paraphrase(tmp_path: Path) -> None:
    store = HybridMemVectorStore(path=tmp_path / "e5.db", embedder="e5")
    try:
        texts = [
            ("pw", "To reset your password, open the account settings page and choose 'Forgot password'."),
            ("rev", "Quarterly revenue grew twelve percent on strong subscription sales."),
            ("cat", "The cat slept on the warm windowsill all afternoon."),
            ("gpu", "The training job ran out of GPU memory at batch size 64."),
        ]
        docs = [Document(text=t, id_=i) for i, t in texts]
        ctx = StorageContext.from_defaults(vector_store=store)
        index = VectorStoreIndex.from_documents(
            docs, storage_context=ctx, embed_model=HybridMemEmbedding(store, skip_documents=True)
        )
        question = "How can I change my login credentials?"  # no word in common with the answer
        bm25 = index.as_retriever(vector_store_query_mode="text_search", similarity_top_k=2).retrieve(question)
        assert "pw" not in _refs(bm25)
        hits = index.as_retriever(vector_store_query_mode="hybrid", similarity_top_k=2).retrieve(question)
        assert _refs(hits)[0] == "pw"
    finally:
        store.close()
