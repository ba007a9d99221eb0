"""Fuzzing (issue 8, faults): the query contract, the filter language and the tokenizer, in process,
through ``Memory`` (tests/server/test_server_fuzz.py covers the HTTP layer; test_filters.py checks that the
SQL and Python filter compilations agree; test_tokenize.py that tokens are clean).

Nothing may raise but hybridmem's own validation errors, and whatever is accepted must answer by the
contract: ``total_retrieved == len(results) <= top_k``, no leg failing inside, every result
satisfying the filter, and the filter applied *before* ranking (every allowed chunk is reachable).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError as PydanticError

from hybridmem import Memory, QueryRequest
from hybridmem.errors import FilterError, NotFoundError, ValidationError
from hybridmem.filters import COMPARE_OPS, MAX_DEPTH, matches, parse_filter
from hybridmem.text.tokenize import detect_language, fold, identifier_tokens, is_identifier, query_tokens, tokenize

FUZZ = settings(max_examples=200, deadline=None, database=None, suppress_health_check=list(HealthCheck))

ENVS = ["production", "staging", "dev"]
SERVICES = ["billing-service", "auth-service", "search"]


def _meta(i: int) -> dict[str, Any]:
    m: dict[str, Any] = {
        "environment": ENVS[i % 3],
        "service": SERVICES[(i // 3) % 3],
        "severity": i % 5,
        "score": round(0.1 * i, 2),
        "date": f"2026-0{1 + i % 6}-{10 + i % 18:02d}",
        "active": i % 2 == 0,
        "tags": ["a", "b"] if i % 4 == 0 else ["c"],
        "it's": "quoted" if i % 3 == 0 else "plain",
        "a.b": i % 2,
    }
    if i % 5 == 0:
        m["owner"] = None
    if i % 7 == 0:
        m["nested"] = {"k": i}
    return m


N_DOCS = 30
DOCS = {
    f"doc-{i}": (
        f"common entry {i}: HEL-40{i:02d} on the {SERVICES[(i // 3) % 3]} pool, "
        f"max_connections {100 + i}, HTTP 50{i % 5}",
        _meta(i),
    )
    for i in range(N_DOCS)
}
KEYS = sorted({k for _, m in DOCS.values() for k in m})


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    m = Memory(tmp_path_factory.mktemp("fuzz") / "f.db", embedder="hash", auto_embed=False, llm="none", reranker="auto")
    m.add_documents([{"id": i, "text": t, "metadata": md} for i, (t, md) in DOCS.items()])
    m.wait_for_vectors()
    try:
        yield m
    finally:
        m.close()


def check_response(resp: Any, top_k: int, flt: dict | None) -> None:
    assert resp.total_retrieved == len(resp.results) <= top_k
    for name, leg in resp.legs.items():
        assert leg.status in ("ok", "skipped"), (name, leg)  # a leg failing inside is a bug, not an answer
    ids = [r.chunk_id for r in resp.results]
    assert len(ids) == len(set(ids))
    parsed = parse_filter(flt) if flt else None
    for r in resp.results:
        assert matches(parsed, r.metadata), (flt, r.metadata)
        assert math.isfinite(r.rrf_score) and all(math.isfinite(s) for s in r.scores.values())
    json.loads(resp.model_dump_json())  # serializable as the contract's JSON (no NaN)


# ------------------------------------------------------------------------------ (a) query contract
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)
modes = st.sampled_from(["bm25", "vector", "hybrid", "rerank", "graph", "HYBRID", "", "sql"])
weights = st.one_of(
    st.floats(-1, 2000, allow_nan=False),
    st.sampled_from([0, 0.0, 1, 1e309, -0.0]),
    st.floats(allow_nan=True, allow_infinity=True),
    json_values,
)
hybrid_params = st.one_of(
    st.dictionaries(
        st.sampled_from(["dense_weight", "sparse_weight", "rrf_k_constant", "exact_weight", "graph_weight", "bogus"]),
        weights,
        max_size=4,
    ),
    json_values,
)
search_texts = st.one_of(
    st.text(max_size=60),
    st.sampled_from(
        [
            "common",
            "HEL-4007",
            "HTTP 504 pool",
            "max_connections 112",
            "   ",
            "\x00",
            "x" * 8001,
            '"; DROP TABLE chunks; --',
            "common OR NEAR(a b) NOT *",
            "^common:*",
        ]
    ),
)
simple_filters = st.dictionaries(
    st.sampled_from(KEYS + ["$or", "$and", "nope"]),
    st.one_of(
        st.sampled_from(ENVS + SERVICES) | st.integers(0, 5),
        st.dictionaries(st.sampled_from(list(COMPARE_OPS) + ["$regex"]), json_values, min_size=1, max_size=2),
        json_values,
    ),
    max_size=3,
)
contract_fields = {
    "search_text": search_texts,
    "top_k": st.one_of(st.integers(-3, 1100), json_values),
    "mode": st.one_of(modes, json_values),
    "hybrid_params": hybrid_params,
    "metadata_filter": st.one_of(simple_filters, json_values),
    "fetch_k": st.one_of(st.integers(-1, 10_001), st.none(), json_values),
    "namespace": st.one_of(st.sampled_from(["default", "other", "", "a\nb", "n" * 129]), st.none(), json_values),
    "rerank": st.one_of(st.booleans(), json_values),
    "reranker": st.one_of(st.sampled_from(["auto", "llm", "identifier", "cohere"]), st.none(), json_values),
    "query_id": st.one_of(st.text(max_size=20), st.just("q" * 300), json_values),
}
plausible_fields = {
    "search_text": st.sampled_from(["common", "HEL-4007", "HTTP 504 pool", "max_connections 112", "billing"])
    | st.text(min_size=1, max_size=30),
    "top_k": st.integers(1, 60),
    "mode": st.sampled_from(["bm25", "vector", "hybrid", "rerank"]),
    "hybrid_params": st.fixed_dictionaries(
        {},
        optional={
            "dense_weight": st.floats(0, 5),
            "sparse_weight": st.floats(0, 5),
            "rrf_k_constant": st.floats(0, 100),
            "exact_weight": st.floats(0, 5),
        },
    ),
    "metadata_filter": st.sampled_from(
        [
            {},
            {"environment": "production"},
            {"severity": {"$gte": 2}},
            {"$or": [{"service": "search"}, {"active": True}]},
            {"tags": {"$exists": True}},
            {"date": {"$lt": "2026-03-01"}},
            {"nested": {"$ne": None}},
        ]
    ),
    "fetch_k": st.integers(60, 200),
    "namespace": st.just("default"),
    "rerank": st.booleans(),
    "reranker": st.sampled_from(["auto", "llm", "identifier"]),
    "query_id": st.text(min_size=1, max_size=20),
}
requests = st.one_of(
    st.fixed_dictionaries({}, optional={**contract_fields, "unknown_field": json_values, "searchText": search_texts}),
    # mostly valid: one field at most is hostile, so the accepted path is explored too
    st.tuples(
        st.fixed_dictionaries(
            {"search_text": plausible_fields["search_text"]},
            optional={k: v for k, v in plausible_fields.items() if k != "search_text"},
        ),
        st.sampled_from(sorted(contract_fields)),
        st.booleans(),
    ).flatmap(lambda t: st.just(t[0]) if t[2] else contract_fields[t[1]].map(lambda v, t=t: {**t[0], t[1]: v})),
)


@FUZZ
@given(data=requests)
def test_query_contract_accepts_or_says_why(mem: Memory, data: dict[str, Any]) -> None:
    try:
        model = QueryRequest.model_validate(data)
    except PydanticError:
        model = None
    try:
        resp = mem.search(dict(data))
    except ValidationError as e:  # FilterError included
        assert str(e) and "Traceback" not in str(e)
        return
    except NotFoundError as e:  # the one non-validation refusal: mode graph before `graph build`
        assert data.get("mode") == "graph" and "graph build" in str(e)
        return
    assert model is not None, f"Memory.search accepted what QueryRequest refuses: {data!r}"
    assert QueryRequest.model_validate_json(model.model_dump_json()) == model  # the contract round-trips
    assert resp.mode == model.mode and (resp.query_id == data["query_id"] if "query_id" in data else resp.query_id)
    check_response(resp, model.top_k, model.metadata_filter)
    if model.mode != "bm25":
        assert resp.pending_vectors == 0


@FUZZ
@given(
    top_k=st.integers(1, 40),
    mode=st.sampled_from(["bm25", "vector", "hybrid", "rerank"]),
    text=st.sampled_from(["common", "HEL-4007 pool", "max_connections", "HTTP 503"]),
    dense=st.sampled_from([0, 0.5, 1.0, 3.0]) | st.floats(0.01, 10),
    sparse=st.sampled_from([0, 1.0]) | st.floats(0.01, 10),
    exact=st.sampled_from([0, 1.0]) | st.floats(0, 10),
    rrf_k=st.sampled_from([0, 1, 60]) | st.floats(0, 1000),
)
def test_valid_requests_always_answer_by_the_contract(
    mem: Memory, top_k: int, mode: str, text: str, dense: float, sparse: float, exact: float, rrf_k: float
) -> None:
    req = {
        "search_text": text,
        "top_k": top_k,
        "mode": mode,
        "hybrid_params": {
            "dense_weight": dense,
            "sparse_weight": sparse,
            "exact_weight": exact,
            "rrf_k_constant": rrf_k,
        },
    }
    if mode in ("hybrid", "rerank") and dense == 0 and sparse == 0:
        with pytest.raises(ValidationError, match="cannot both be 0"):
            mem.search(req)
        return
    if (mode == "bm25" and sparse == 0) or (mode == "vector" and dense == 0):  # its only leg weighs nothing
        with pytest.raises(ValidationError, match="gives it no weight"):
            mem.search(req)
        return
    resp = mem.search(req)
    check_response(resp, top_k, None)
    if (mode == "bm25" and text == "common") or (mode != "bm25" and dense > 0):
        assert resp.total_retrieved == min(top_k, N_DOCS)  # every document is reachable: a full page


# ------------------------------------------------------------------------------ (b) filter language
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-10, 10),
    st.integers(-(2**64), 2**64),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(ENVS + SERVICES + ["2026-03-15", "a", "c", "quoted", "plain", ""]),
    st.text(max_size=5),
)
any_value = st.one_of(scalars, st.lists(scalars, max_size=3), st.dictionaries(st.text(max_size=4), scalars, max_size=2))
filter_keys = st.one_of(
    st.sampled_from(KEYS),
    st.sampled_from(["missing", "$x", 'a"b', "", "k" * 129, "a\\b", "$.environment", "x\ny"]),
    st.text(max_size=6),
)
op_names = st.one_of(st.sampled_from(COMPARE_OPS), st.sampled_from(["$regex", "$not", "$eq ", "$IN", "gt", "$where"]))
op_values = st.one_of(any_value, st.lists(scalars, min_size=1, max_size=4), st.booleans())
field_specs = st.one_of(any_value, st.dictionaries(op_names, op_values, max_size=3))
ok_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-1, 6),
    st.sampled_from([0.5, 1.3, 2.0, -0.0]),
    st.sampled_from(ENVS + SERVICES + ["2026-03-15", "2026-05", "a", "c", "quoted", "plain", ""]),
)
ok_specs = st.one_of(
    ok_scalars,
    st.fixed_dictionaries(
        {},
        optional={
            "$eq": ok_scalars,
            "$ne": ok_scalars,
            "$in": st.lists(ok_scalars, min_size=1, max_size=3),
            "$nin": st.lists(ok_scalars, min_size=1, max_size=3),
            "$gt": st.integers(-1, 6) | st.sampled_from(["2026-03-01", "b"]),
            "$gte": st.floats(-1, 6),
            "$lt": st.integers(0, 6) | st.just("2026-04-01"),
            "$lte": st.just("2026-02-15"),
            "$exists": st.booleans(),
        },
    ).filter(bool),
)


def _conds(
    keys: st.SearchStrategy[str], specs: st.SearchStrategy[Any] = field_specs
) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(keys, specs, min_size=1, max_size=2)


def _filters(
    keys: st.SearchStrategy[str], specs: st.SearchStrategy[Any] = field_specs, leaves: int = 12
) -> st.SearchStrategy[Any]:
    return st.recursive(
        _conds(keys, specs),
        lambda kids: st.one_of(
            st.builds(lambda xs: {"$and": xs}, st.lists(kids, max_size=3)),
            st.builds(lambda xs: {"$or": xs}, st.lists(kids, max_size=3)),
            st.builds(lambda c, xs: {**c, "$or": xs}, _conds(keys, specs), st.lists(kids, min_size=1, max_size=2)),
            st.builds(lambda xs: {"$nor": xs}, st.lists(kids, max_size=2)),
            st.builds(lambda x: {"$and": x}, kids),  # not a list
        ),
        max_leaves=leaves,
    )


hostile_filters = st.one_of(_filters(filter_keys), json_values)
PAIRS = sorted({(k, json.dumps(v)) for _, m in DOCS.values() for k, v in m.items()})


def _known_cond(pair: tuple[str, str], how: int, other: Any) -> dict[str, Any]:
    k, v = pair[0], json.loads(pair[1])
    if isinstance(v, (list, dict)):  # lists and objects equal nothing: exists / not-equal only
        return {k: {"$exists": bool(how % 2)} if how < 4 else {"$ne": other}}
    ordered = isinstance(v, (int, float, str)) and not isinstance(v, bool)
    return {
        k: [
            v,
            {"$ne": v},
            {"$in": [other, v]},
            {"$nin": [v]},
            {"$exists": how == 4},
            {"$gte": v} if ordered else {"$eq": v},
            {"$lt": v} if ordered else {"$ne": other},
        ][how]
    }


known_conds = st.builds(_known_cond, st.sampled_from(PAIRS), st.integers(0, 6), ok_scalars)
known_key_filters = st.recursive(
    known_conds,
    lambda kids: st.one_of(
        st.builds(lambda xs: {"$and": xs}, st.lists(kids, min_size=1, max_size=3)),
        st.builds(lambda xs: {"$or": xs}, st.lists(kids, min_size=1, max_size=3)),
        st.builds(lambda a, b: {**a, **b}, kids, kids),  # implicit $and (the second wins a repeated key)
    ),
    max_leaves=6,
)


def _nest(depth: int, op: str) -> dict[str, Any]:
    f: dict[str, Any] = {"environment": "production"}
    for _ in range(depth):
        f = {op: [f, {"severity": {"$gte": 0}}]}
    return f


@FUZZ
@given(spec=hostile_filters)
def test_parse_filter_raises_only_filter_errors(spec: Any) -> None:
    try:
        parsed = parse_filter(spec)
    except FilterError as e:
        assert str(e).startswith("metadata_filter: ")
        return
    for meta in (m for _, m in DOCS.values()):
        assert matches(parsed, meta) in (True, False)


@FUZZ
@given(spec=st.one_of(known_key_filters, hostile_filters), mode=st.sampled_from(["bm25", "vector", "hybrid"]))
def test_search_with_random_filters_prefilters_exactly(mem: Memory, spec: Any, mode: str) -> None:
    """All 30 documents contain "common": with top_k above that, a search returns exactly the
    documents the filter allows (the Python predicate decides), whatever leg ranks them."""
    assume(spec is not None)  # None is "no filter" to parse_filter, but not a valid metadata_filter
    try:
        parsed = parse_filter(spec)
    except FilterError:
        with pytest.raises(ValidationError):
            mem.search("common", mode=mode, metadata_filter=spec)
        return
    # keys this namespace never saw are no error: a missing key means on every leg what the Python
    # predicate says it means, and the response names the key
    resp = mem.search("common", mode=mode, top_k=50, metadata_filter=spec)
    check_response(resp, 50, spec)
    allowed = {i for i, (_, m) in DOCS.items() if matches(parsed, m)}
    assert {r.doc_id for r in resp.results} == allowed, spec


@pytest.mark.parametrize("op", ["$and", "$or"])
def test_filter_nesting_limit(mem: Memory, op: str) -> None:
    ok = mem.search("common", top_k=50, metadata_filter=_nest(MAX_DEPTH, op)).results
    if op == "$and":  # production AND severity >= 0, eight times over
        assert len(ok) == 10 and all(r.metadata["environment"] == "production" for r in ok)
    else:  # production OR severity >= 0: everything
        assert len(ok) == N_DOCS
    for depth in (MAX_DEPTH + 1, 50, 900):  # far past the limit: still a FilterError, never a RecursionError
        with pytest.raises(FilterError, match=f"nested deeper than {MAX_DEPTH} levels"):
            mem.search("common", metadata_filter=_nest(depth, op))


# ------------------------------------------------------------------------------ (c) tokenizer
COMBINING = [chr(c) for c in range(0x300, 0x370)] + ["\u0e31", "\u093f", "\u094d", "\u20dd", "\u1ab0"]
CJK = list("数据库连接池超时错误日本語のテキスト한국어텍스트") + ["\u3400", "\U00020000", "\uff21", "\u3000"]
RTL = list("שלום עולם مرحبا بالعالم") + ["\u200f", "\u202e", "\u061c", "\u0640"]
EMOJI = ["😀", "👍🏽", "👨\u200d👩\u200d👧", "🇫🇷", "1\ufe0f\u20e3", "\u2764\ufe0f", "🏳️‍🌈"]
CONTROL = [chr(c) for c in range(1, 32)] + ["\x7f", "\u0085", "\u2028", "\u2029", "\ufeff", "\u200b", "\u00ad"]
ASCIIISH = list("abcHEL-4040 max_connections v2.3.1 HTTP 504 l'été ß ﬁ ⅷ ² ½ ") + ["'", '"', "*", "(", ")"]
unicode_text = st.one_of(
    st.text(st.characters(exclude_categories=("Cs",)), max_size=80),
    st.lists(st.sampled_from(COMBINING + CJK + RTL + EMOJI + CONTROL + ASCIIISH), max_size=60).map("".join),
    st.lists(
        st.sampled_from(
            [
                "HEL-4040",
                "数据库",
                "שלום",
                "e\u0301te\u0301",
                "😀",
                "\u202eevil",
                "max_connections",
                "http 504",
                "\t",
                "\u0000",
            ]
        ),
        max_size=8,
    ).map(" ".join),
)


@FUZZ
@given(text=unicode_text, lang=st.sampled_from(["auto", None, "en", "fr", "de", "es", "zh"]))
def test_tokenizer_on_hostile_unicode(text: str, lang: str | None) -> None:
    folded = fold(text)
    assert fold(folded) == folded  # idempotent
    toks = tokenize(text, lang)
    assert all(isinstance(t, str) and t and not any(c.isspace() for c in t) for t in toks)
    assert all(unicodedata_ok(t) for t in toks)
    q = query_tokens(text, lang)
    assert len(q) == len(set(q)) <= 64 * 5
    idents = identifier_tokens(text, lang)
    assert set(idents) <= set(q) and all(is_identifier(t) for t in idents)
    assert detect_language(text) in (None, "en", "fr", "de", "es", "zh")


def unicodedata_ok(token: str) -> bool:
    # tokens reach FTS5 as quoted strings and postings keys: never a quote, NUL or control character
    return '"' not in token and not any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in token)


@FUZZ
@given(text=unicode_text)
def test_any_stored_text_is_found_by_searching_it(mem: Memory, text: str) -> None:
    """Add a document with hostile text, search that text verbatim: found when it has any token,
    by the in-memory BM25 postings and by FTS5 alike; every mode answers; then it is deleted."""
    try:
        rep = mem.add(text, id="fuzz-doc", metadata={"environment": "dev"})
    except ValidationError as e:
        assert "\x00" in text or not text.strip(), (text, e)
        return
    try:
        assert rep.added == ["fuzz-doc"] or rep.updated == ["fuzz-doc"]
        mem.wait_for_vectors()
        resp = mem.search(text, mode="bm25", top_k=N_DOCS + 1)
        check_response(resp, N_DOCS + 1, None)
        terms = query_tokens(text)
        if terms:
            assert "fuzz-doc" in {r.doc_id for r in resp.results}, (text, terms)
        fts = mem.store.bm25("default", terms, None, N_DOCS + 1)
        fts_docs = {r.doc_id for r in mem.store.fetch([rid for rid, _ in fts]).values()}
        assert fts_docs == {r.doc_id for r in resp.results}, (text, terms)  # postings == FTS5
        for mode in ("vector", "hybrid", "rerank"):
            check_response(mem.search(text, mode=mode, top_k=5), 5, None)
        check_response(mem.search(text, top_k=5, metadata_filter={"environment": "dev"}), 5, {"environment": "dev"})
    finally:
        mem.delete("fuzz-doc")
