"""BM25 leg: no user text reaches FTS5 query syntax, and our FTS5 ranking matches an independent
BM25 (rank_bm25) on the same tokens over SciFact, with a reference nDCG@10."""

from __future__ import annotations

import collections
import math
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hybridmem import Memory, ValidationError
from hybridmem.ingest import _LANGS
from hybridmem.text.chunk import chunk_text
from hybridmem.text.tokenize import detect_language, query_tokens, tokenize


# ---------------------------------------------------------------- query syntax never leaks
@pytest.fixture(scope="module")
def small_mem(tmp_path_factory):
    m = Memory(tmp_path_factory.mktemp("bm25") / "m.db", embedder="hash", auto_embed=False)
    m.add_documents(
        [
            {"id": "near", "text": "The NEAR operator and the NOT keyword are plain words here (really)."},
            {"id": "code", "text": 'Error HEL-4040: "quoted" value in max_connections; see c++ and foo.bar() ^^'},
            {"id": "emoji", "text": "Deploy went fine 🚀 except the {braces} and col:on tokens * - +"},
            {"id": "fr", "text": "Les connexions à la base de données sont dépassées."},
            {"id": "zh", "text": "数据库连接池耗尽导致网关超时"},
        ]
    )
    yield m
    m.close()


SYNTAX = [
    '"',
    "*",
    "-",
    "(",
    ")",
    "AND",
    "OR",
    "NOT",
    "NEAR",
    "NEAR(",
    ":",
    "^",
    "{",
    "}",
    "+",
    "'",
    "😀",
    "🚀",
    "\\",
    "col:on",
    "HEL-4040",
    " ",
    "\t",
    "\n",
    "c++",
    "数据",
    "é",
    "\u0301",
]
queries = st.lists(
    st.one_of(st.sampled_from(SYNTAX), st.text(max_size=8), st.text(alphabet='"*-():^{}ANDORTE ', max_size=8)),
    min_size=1,
    max_size=12,
).map(lambda parts: " ".join(parts) if len(parts) % 2 else "".join(parts))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(queries)
def test_any_query_text_is_safe(small_mem, q):
    if not q.strip() or "\x00" in q:
        with pytest.raises(ValidationError) as ei:
            small_mem.search(q, mode="bm25")
        assert ei.value.field == "search_text"
        return
    resp = small_mem.search(q, mode="bm25", top_k=10)
    assert resp.legs["bm25"].status == "ok"
    assert resp.total_retrieved == len(resp.results) <= 5
    assert {r.doc_id for r in resp.results} <= {"near", "code", "emoji", "fr", "zh"}
    # a result shares at least one token with the query
    q_toks = set(query_tokens(q))
    for r in resp.results:
        assert q_toks & set(tokenize(r.text, None)) or q_toks & set(tokenize(r.text)), (q, r.text)


@pytest.mark.parametrize(
    "q, expect",
    [
        ("NEAR(operator keyword)", "near"),
        ('"quoted" AND value', "code"),
        ("HEL-4040", "code"),
        ("max_connections^", "code"),
        ("foo.bar()", "code"),
        ("{braces} col:on", "emoji"),
        ("🚀 deploy*", "emoji"),
        ("connexions dépassées", "fr"),
        ("连接池", "zh"),
        ("-NOT (plain)", "near"),
    ],
)
def test_syntax_characters_are_literal(small_mem, q, expect):
    resp = small_mem.search(q, mode="bm25")
    assert resp.results and resp.results[0].doc_id == expect


@pytest.mark.parametrize("blank", ["", " ", "\n\t ", "\u3000"])
def test_blank_query_is_a_validation_error(small_mem, blank):
    with pytest.raises(ValidationError) as ei:
        small_mem.search(blank, mode="bm25")
    assert ei.value.field == "search_text"


def test_query_of_stopwords_only_returns_nothing(small_mem):
    resp = small_mem.search("the and of", mode="bm25")
    assert resp.results == [] and resp.legs["bm25"].status == "ok"


# ---------------------------------------------------------------- SciFact oracle
def _ndcg10(ranked: list[str], rel: dict[str, int]) -> float:
    dcg = sum(rel.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sorted(rel.values(), reverse=True)[:10]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


@pytest.fixture(scope="module")
def scifact(scifact_bm25):
    rank_bm25 = pytest.importorskip("rank_bm25")
    t0 = time.perf_counter()
    ds, m, rep = scifact_bm25
    queries, qrels, docs = ds.queries, ds.qrels, ds.docs
    assert len(rep.added) == len(docs) and rep.chunks_written == len(docs)
    ours = {qid: [r.doc_id for r in m.search(queries[qid], mode="bm25", top_k=10, fetch_k=10).results] for qid in qrels}

    # the oracle: exactly the tokens Memory._prepare indexed: one chunk per document, tokenized in
    # the language Memory detected for it (recorded per chunk in the store)
    langs = dict(m.store.reader.execute("SELECT doc_id, lang FROM chunks").fetchall())
    assert len(langs) == len(docs) and set(langs.values()) <= _LANGS | {None}
    for d in docs[:50]:
        assert langs[d["id"]] == detect_language(d["text"])
    doc_tokens = []
    for d in docs:
        (chunk,) = chunk_text(d["text"], None)
        doc_tokens.append(tokenize(chunk, langs[d["id"]]))
    # FTS5's BM25: k1 = 1.2, b = 0.75, and an IDF floored near 0 for terms in over half the documents
    oracle = rank_bm25.BM25Okapi(doc_tokens, k1=1.2, b=0.75, epsilon=0.0)
    postings: dict[str, list[int]] = collections.defaultdict(list)
    for i, toks in enumerate(doc_tokens):
        for t in set(toks):
            postings[t].append(i)
    theirs = {}
    for qid in qrels:
        # BM25 is a sum over query terms, and a term adds 0 to a document without it: summing
        # rank_bm25's per-term scores over each term's postings equals get_scores, only faster
        scores = np.zeros(len(docs))
        for t in query_tokens(queries[qid]):
            ids = postings.get(t)
            if ids:
                scores[ids] += oracle.get_batch_scores([t], ids)
        if len(theirs) < 3:  # the shortcut is exact
            np.testing.assert_allclose(scores, oracle.get_scores(query_tokens(queries[qid])), rtol=1e-9, atol=1e-12)
        order = np.lexsort((np.arange(len(docs)), -scores))[:10]
        theirs[qid] = [docs[j]["id"] for j in order if scores[j] > 0]
    return {"qrels": qrels, "ours": ours, "theirs": theirs, "seconds": time.perf_counter() - t0}


def test_scifact_bm25_matches_rank_bm25(scifact):
    qrels, ours, theirs = scifact["qrels"], scifact["ours"], scifact["theirs"]
    assert len(qrels) == 300
    overlaps = [len(set(ours[q]) & set(theirs[q])) / max(1, len(theirs[q])) for q in qrels]
    mean = sum(overlaps) / len(overlaps)
    top1 = sum(bool(ours[q]) and bool(theirs[q]) and ours[q][0] == theirs[q][0] for q in qrels) / len(qrels)
    print(
        f"\nSciFact BM25 vs rank_bm25: mean top-10 overlap {mean:.4f}, top-1 agreement {top1:.4f} "
        f"({scifact['seconds']:.1f}s)"
    )
    assert all(len(ours[q]) == 10 for q in qrels)
    assert mean >= 0.9
    assert top1 >= 0.9


def test_scifact_bm25_ndcg(scifact):
    qrels, ours = scifact["qrels"], scifact["ours"]
    ndcg = sum(_ndcg10(ours[q], qrels[q]) for q in qrels) / len(qrels)
    oracle = sum(_ndcg10(scifact["theirs"][q], qrels[q]) for q in qrels) / len(qrels)
    print(f"\nSciFact test nDCG@10: ours {ndcg:.4f}, rank_bm25 on our tokens {oracle:.4f} (Pyserini BM25 flat: 0.679)")
    assert ndcg >= 0.64
    assert abs(ndcg - oracle) < 0.02
