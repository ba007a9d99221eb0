"""Metadata filters: parser errors, operator semantics, and SQL == Python predicate (hypothesis)."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hybridmem.errors import FilterError, ValidationError
from hybridmem.filters import And, Cond, Or, canonical, filter_keys, matches, parse_filter
from hybridmem.store.sql.filters import to_sql


def sql_select(
    metas: list[dict[str, Any]], spec: dict[str, Any] | None, db: sqlite3.Connection | None = None
) -> set[int]:
    own = db is None
    if db is None:
        db = sqlite3.connect(":memory:")
    db.execute("DROP TABLE IF EXISTS t")
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, metadata TEXT NOT NULL)")
    db.executemany(
        "INSERT INTO t VALUES (?, ?)",
        [(i, json.dumps(m, ensure_ascii=False, allow_nan=False)) for i, m in enumerate(metas)],
    )
    where, params = to_sql(parse_filter(spec), "metadata")
    out = {r[0] for r in db.execute(f"SELECT id FROM t WHERE {where}", params)}
    if own:
        db.close()
    return out


def py_select(metas: list[dict[str, Any]], spec: dict[str, Any] | None) -> set[int]:
    f = parse_filter(spec)
    return {i for i, m in enumerate(metas) if matches(f, m)}


def select(metas, spec) -> set[int]:
    """Rows selected by a filter; asserts both compilations agree."""
    a, b = sql_select(metas, spec), py_select(metas, spec)
    assert a == b, f"SQL {sorted(a)} != Python {sorted(b)} for {spec}"
    return a


# ---------------------------------------------------------------- parser
def test_unknown_field_operator_is_named():
    with pytest.raises(FilterError, match=r"\$regex") as ei:
        parse_filter({"service": {"$regex": "bill.*"}})
    assert "service" in str(ei.value)
    assert ei.value.field == "metadata_filter"
    assert isinstance(ei.value, ValidationError)


def test_unknown_top_level_operator_is_named():
    with pytest.raises(FilterError, match=r"\$foo"):
        parse_filter({"$foo": [{"a": 1}]})
    with pytest.raises(FilterError, match=r"\$gte.*top level|top level"):
        parse_filter({"$gte": 3})


@pytest.mark.parametrize("key", ["", 'a"b', "a\\b", "tab\there", "new\nline", "$dollar", "x" * 129])
def test_invalid_keys_rejected(key):
    with pytest.raises(FilterError, match="invalid metadata key|unknown filter operator"):
        parse_filter({key: 1})


def test_key_length_limit_is_inclusive():
    assert parse_filter({"x" * 128: 1}) == Cond("x" * 128, "$eq", 1)


@pytest.mark.parametrize(
    "spec, msg",
    [
        ([{"a": 1}], "JSON object"),
        ({"a": {}}, "empty operator"),
        ({"a": {"$in": "x"}}, "non-empty list"),
        ({"a": {"$in": []}}, "non-empty list"),
        ({"a": {"$nin": [[1]]}}, "expected a string"),
        ({"a": {"$exists": 1}}, "true or false"),
        ({"a": {"$gt": True}}, "number or a string"),
        ({"a": {"$lt": None}}, "number or a string"),
        ({"a": {"$eq": [1, 2]}}, "expected a string"),
        ({"a": {"k": 1}}, "unknown filter operator"),
        ({"a": [1, 2]}, "expected a string"),
        ({"$and": []}, "non-empty list"),
        ({"$or": {"a": 1}}, "non-empty list"),
        ({"$or": [{}]}, "empty filter"),
    ],
)
def test_malformed_filters(spec, msg):
    with pytest.raises(FilterError, match=msg):
        parse_filter(spec)


def test_depth_limit():
    spec: dict[str, Any] = {"a": 1}
    for _ in range(12):
        spec = {"$and": [spec]}
    with pytest.raises(FilterError, match="deeper"):
        parse_filter(spec)


@pytest.mark.parametrize("spec", [{"n": 2**63}, {"n": {"$gt": -(2**63) - 1}}, {"n": {"$in": [1, 10**30]}}])
def test_integers_beyond_64_bits_rejected(spec):
    # SQLite cannot bind them: a clear FilterError, not an OverflowError from the driver
    with pytest.raises(FilterError, match="64-bit"):
        parse_filter(spec)


def test_int64_bounds_accepted():
    metas = [{"n": 2**63 - 1}, {"n": -(2**63)}, {"n": 0}]
    assert select(metas, {"n": 2**63 - 1}) == {0}
    assert select(metas, {"n": {"$lt": 0}}) == {1}


def test_non_finite_filter_values_agree():
    metas = [{"a": 5}, {"a": "x"}, {}]
    assert select(metas, {"a": float("nan")}) == set()
    assert select(metas, {"a": {"$ne": float("nan")}}) == {0, 1, 2}
    assert select(metas, {"a": {"$lt": float("inf")}}) == {0}
    assert select(metas, {"a": {"$gt": float("-inf")}}) == {0}


def test_parse_shapes_and_keys():
    assert parse_filter(None) is None
    assert parse_filter({}) is None
    assert parse_filter({"a": 1}) == Cond("a", "$eq", 1)
    f = parse_filter({"a": 1, "b": {"$gte": 2, "$lt": 5}})
    assert f == And((Cond("a", "$eq", 1), And((Cond("b", "$gte", 2), Cond("b", "$lt", 5)))))
    g = parse_filter({"$or": [{"a": 1}, {"c": {"$in": ["x", "y"]}}]})
    assert g == Or((Cond("a", "$eq", 1), Cond("c", "$in", ("x", "y"))))
    assert filter_keys(f) == {"a", "b"} and filter_keys(g) == {"a", "c"} and filter_keys(None) == set()
    assert canonical({"b": 1, "a": 2}) == canonical({"a": 2, "b": 1}) == '{"a":2,"b":1}'


def test_sql_uses_bound_parameters_for_values():
    where, params = to_sql(parse_filter({"service": "x' OR 1=1 --"}))
    assert "OR 1=1" not in where
    assert params == ["x' OR 1=1 --"]
    assert to_sql(None) == ("1", [])


# ---------------------------------------------------------------- semantics (both compilations)
METAS = [
    {"env": "production", "service": "billing", "severity": 3, "date": "2026-05-01", "on_call": True},
    {"env": "staging", "service": "billing", "severity": 1, "date": "2026-06-15", "on_call": False},
    {"env": "production", "service": "auth", "severity": 2.5, "date": "2025-12-31T23:59:00Z", "tag": None},
    {"env": "production", "service": "search", "severity": "3", "tags": ["a", "b"]},
    {"service": "auth", "severity": 5, "nested": {"x": 1}},
    {},
]


def test_equality_implicit_and():
    assert select(METAS, {"env": "production"}) == {0, 2, 3}
    assert select(METAS, {"env": "production", "service": "billing"}) == {0}
    assert select(METAS, {"env": "nowhere"}) == set()


def test_in_and_nin():
    assert select(METAS, {"service": {"$in": ["auth", "search"]}}) == {2, 3, 4}
    # $nin holds for rows without the key
    assert select(METAS, {"env": {"$nin": ["production"]}}) == {1, 4, 5}


def test_ne_holds_for_missing_keys():
    assert select(METAS, {"env": {"$ne": "staging"}}) == {0, 2, 3, 4, 5}
    assert select(METAS, {"env": {"$eq": "staging"}}) == {1}


def test_numeric_comparisons_only_between_numbers():
    assert select(METAS, {"severity": {"$gt": 2}}) == {0, 2, 4}  # "3" is a string, not a number
    assert select(METAS, {"severity": {"$gte": 3}}) == {0, 4}
    assert select(METAS, {"severity": {"$lt": 3}}) == {1, 2}
    assert select(METAS, {"severity": {"$lte": 2.5}}) == {1, 2}
    assert select(METAS, {"severity": {"$gte": 2, "$lte": 3}}) == {0, 2}
    assert select(METAS, {"severity": 3}) == {0}  # the string "3" is not the number 3
    assert select(METAS, {"severity": "3"}) == {3}
    assert select(METAS, {"severity": 3.0}) == {0}  # 3 and 3.0 are the same number


def test_iso_date_comparisons():
    assert select(METAS, {"date": {"$lt": "2026-06-01"}}) == {0, 2}
    assert select(METAS, {"date": {"$gte": "2026-01-01"}}) == {0, 1}
    assert select(METAS, {"date": {"$gt": "2025-12-31"}}) == {0, 1, 2}  # datetime after its date
    assert select(METAS, {"date": {"$gte": "2026-05-01", "$lte": "2026-05-01"}}) == {0}


def test_and_or():
    assert select(METAS, {"$or": [{"env": "staging"}, {"service": "auth"}]}) == {1, 2, 4}
    assert select(METAS, {"$and": [{"env": "production"}, {"severity": {"$gt": 2}}]}) == {0, 2}
    spec = {"env": "production", "$or": [{"service": "search"}, {"severity": {"$lt": 3}}]}
    assert select(METAS, spec) == {2, 3}


def test_exists():
    assert select(METAS, {"env": {"$exists": True}}) == {0, 1, 2, 3}
    assert select(METAS, {"env": {"$exists": False}}) == {4, 5}
    # a key set to null exists
    assert select(METAS, {"tag": {"$exists": True}}) == {2}


def test_null_and_bool():
    assert select(METAS, {"tag": None}) == {2}
    assert select(METAS, {"on_call": True}) == {0}
    assert select(METAS, {"on_call": False}) == {1}
    # booleans are not numbers, numbers are not booleans
    assert select([{"x": 1}, {"x": True}, {"x": 0}, {"x": False}], {"x": True}) == {1}
    assert select([{"x": 1}, {"x": True}, {"x": 0}, {"x": False}], {"x": 1}) == {0}
    assert select([{"x": 1}, {"x": True}, {"x": 0}, {"x": False}], {"x": {"$ne": False}}) == {0, 1, 2}


def test_lists_and_objects_equal_no_scalar():
    assert select(METAS, {"tags": "a"}) == set()
    assert select(METAS, {"tags": {"$exists": True}}) == {3}
    assert select(METAS, {"nested": {"$gt": 0}}) == set()
    assert select(METAS, {"nested": {"$ne": 1}}) == set(range(len(METAS)))


def test_odd_keys_are_quoted_safely():
    metas = [{"it's": 1, "a.b": "x", "a": {"b": "y"}, "sp ace": True, "ünï": 2}, {"a.b": "z"}]
    assert select(metas, {"it's": 1}) == {0}
    assert select(metas, {"a.b": "x"}) == {0}  # the key "a.b", not the path a → b
    assert select(metas, {"a.b": "y"}) == set()
    assert select(metas, {"sp ace": True}) == {0}
    assert select(metas, {"ünï": {"$gte": 2}}) == {0}


# ---------------------------------------------------------------- SQL == Python, generated
KEYS = ["a", "b", "n", "date", "it's", "x.y", "é"]
texts = st.one_of(
    st.sampled_from(["", "a", "b", "A", "production", "staging", "é", "2026-05-01", "2026-06-01T12:00:00Z", "3"]),
    st.text(
        st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=6
    ),  # NUL is refused at ingest and in filters
)
numbers = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.sampled_from([0, 1, 2, 3, -1, 0.5, 2.5, 3.0, -0.0, 2**53 + 1, float(2**53), 2**63 - 1, float(2**63)]),
    st.floats(allow_nan=False, allow_infinity=False),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, texts)
values = st.one_of(
    scalars,
    st.lists(scalars, max_size=3),
    st.dictionaries(st.sampled_from(KEYS), scalars, max_size=2),
)
metadata = st.dictionaries(st.sampled_from(KEYS), values, max_size=len(KEYS))


def _cond() -> st.SearchStrategy[dict[str, Any]]:
    key = st.sampled_from(KEYS)
    ops = st.one_of(
        scalars,  # implicit $eq
        st.fixed_dictionaries(
            {},
            optional={
                "$eq": scalars,
                "$ne": scalars,
                "$in": st.lists(scalars, min_size=1, max_size=12),  # > 8: the set lookups of both dialects
                "$nin": st.lists(scalars, min_size=1, max_size=12),
                "$gt": st.one_of(numbers, texts),
                "$gte": st.one_of(numbers, texts),
                "$lt": st.one_of(numbers, texts),
                "$lte": st.one_of(numbers, texts),
                "$exists": st.booleans(),
            },
        ).filter(bool),
    )
    return st.dictionaries(key, ops, min_size=1, max_size=3)


filters = st.recursive(
    _cond(),
    lambda children: st.one_of(
        st.builds(lambda xs: {"$and": xs}, st.lists(children, min_size=1, max_size=3)),
        st.builds(lambda xs: {"$or": xs}, st.lists(children, min_size=1, max_size=3)),
        st.builds(lambda c, xs: {**c, "$or": xs}, _cond(), st.lists(children, min_size=1, max_size=3)),
    ),
    max_leaves=8,
)


@pytest.fixture(scope="module")
def sqlite_db():
    db = sqlite3.connect(":memory:")
    yield db
    db.close()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(metadata, min_size=1, max_size=12), filters)
def test_sql_and_python_agree(sqlite_db, metas, spec):
    f = parse_filter(spec)
    assert f is not None
    sql_rows = sql_select(metas, spec, sqlite_db)
    py_rows = {i for i, m in enumerate(metas) if matches(f, m)}
    assert sql_rows == py_rows, (spec, [metas[i] for i in sorted(sql_rows ^ py_rows)])


LONG_IN_METAS = [{"k": v} for v in ("a", "b", 1, 1.0, 2.5, True, False, None, "1", "true", [1], {"x": 1})] + [{}]
LONG_IN_SPECS = [
    {"k": {"$in": ["a", 1, None, *[f"z{i}" for i in range(12)]]}},  # text, number, null in one long list
    {"k": {"$nin": [2.5, "true", False, *range(100, 112)]}},
    {"k": {"$in": [1.0, *range(1000, 1011)]}},  # 1.0 equals the stored 1 and 1.0
]


@pytest.mark.parametrize("spec", LONG_IN_SPECS)
def test_long_in_lists_are_set_lookups_with_the_same_semantics(sqlite_db, spec):
    """``$in`` compiles to one ``IN`` list per kind (not an ``OR`` of equalities): same rows as Python."""
    sql, _ = to_sql(parse_filter(spec))
    assert " IN (?," in sql
    expected = {i for i, m in enumerate(LONG_IN_METAS) if matches(parse_filter(spec), m)}
    assert expected  # every spec here selects something ($nin keeps the rest)
    assert sql_select(LONG_IN_METAS, spec, sqlite_db) == expected


def test_cached_filters_of_equal_but_different_values_stay_apart(tmp_path) -> None:
    """0 == False and 1 == 1.0 in Python: a filter cache keyed by the parsed filter answered
    {"active": False} with the (empty) set cached for {"active": 0} (found by the fuzz test)."""
    from hybridmem import Memory

    with Memory(tmp_path / "f.db", embedder="hash", auto_embed=False) as m:
        m.add_documents([{"id": f"d{i}", "text": "common words", "metadata": {"active": i % 2 == 0}} for i in range(6)])
        m.wait_for_vectors()
        for mode in ("bm25", "vector", "hybrid"):
            assert m.search("common", mode=mode, metadata_filter={"active": 0}, top_k=10).results == []
            got = {r.doc_id for r in m.search("common", mode=mode, metadata_filter={"active": False}, top_k=10).results}
            assert got == {"d1", "d3", "d5"}, mode
            assert m.search("common", mode=mode, metadata_filter={"active": 1}, top_k=10).results == []
            got = {r.doc_id for r in m.search("common", mode=mode, metadata_filter={"active": True}, top_k=10).results}
            assert got == {"d0", "d2", "d4"}, mode
