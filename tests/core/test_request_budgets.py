"""Issue 16: a request's cost is bounded before the store sees it, and its deadline stops the work;
bad input gets a 4xx-class error, never a crash (both backends where they apply)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from hybridmem import Memory, config
from hybridmem import deadline as dl
from hybridmem.errors import FilterError, ValidationError
from hybridmem.filters import MAX_CONDITIONS, MAX_IN_VALUES, MAX_VALUE_CHARS, parse_filter


def _mem(target: str | Path) -> Memory:
    return Memory(target, embedder="hash", auto_embed=False)


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ({"$or": [{"k": i} for i in range(2000)]}, "condition limit"),
        ({f"k{i}": i for i in range(MAX_CONDITIONS + 1)}, "condition limit"),
        ({"k": {"$in": list(range(MAX_IN_VALUES + 1))}}, f"limit of {MAX_IN_VALUES} per list"),
        ({"$and": [{"k": {"$in": list(range(1000))}} for _ in range(5)]}, "values exceeds the limit"),
        ({"k": "x" * (MAX_VALUE_CHARS + 1)}, "character limit"),
        ({"k": "\udc00"}, "unpaired surrogate"),
        ({"k": {"$in": ["a", "b\x00"]}}, "NUL character"),
        ({"k": {"$gt": 10**30}}, "64-bit"),
    ],
)
def test_filters_over_budget_are_refused_by_the_parser(spec: dict, needle: str) -> None:
    with pytest.raises(FilterError, match=needle):
        parse_filter(spec)


def test_filter_budget_holds_on_every_backend(target: str | Path) -> None:
    with _mem(target) as m:
        m.add("budget note", id="b1", metadata={"k": 1})
        for spec in ({"$or": [{"k": i} for i in range(1000)]}, {"k": "\udc00"}):
            with pytest.raises(FilterError):
                m.search("budget", metadata_filter=spec)
        # at the limit it answers, on both backends, with the right rows
        spec = {"$or": [{"k": i} for i in range(MAX_CONDITIONS)]}
        assert [r.doc_id for r in m.search("budget", mode="bm25", metadata_filter=spec).results] == ["b1"]
        # a full $in list (compiled as a balanced tree: a flat chain of 1,024 was past SQLite's depth limit)
        for spec in (
            {"k": {"$in": list(range(MAX_IN_VALUES))}},
            {"k": {"$nin": [-i for i in range(1, MAX_IN_VALUES + 1)]}},
            {"$and": [{"k": {"$in": list(range(MAX_IN_VALUES))}} for _ in range(3)]},
        ):
            for mode in ("bm25", "hybrid"):
                assert [r.doc_id for r in m.search("budget", mode=mode, metadata_filter=spec).results] == ["b1"]


def test_metadata_budget_and_shapes(target: str | Path) -> None:
    with _mem(target) as m:
        before = m.stats().documents
        with pytest.raises(ValidationError, match="character limit"):
            m.add("x", id="big", metadata={"k": "x" * (config.MAX_METADATA_VALUE_CHARS + 1)})
        with pytest.raises(ValidationError, match="byte limit per document"):
            m.add("x", id="big", metadata={f"k{i}": "y" * 1000 for i in range(20)})
        with pytest.raises(ValidationError, match="keys exceeds the limit"):
            m.add("x", id="big", metadata={"k": [{"a": i} for i in range(config.MAX_METADATA_KEYS + 1)]})
        with pytest.raises(ValidationError, match="64 bits"):
            m.add("x", id="big", metadata={"n": 10**5000})
        with pytest.raises(ValidationError, match="NUL"):
            m.add("x", id="big", metadata={"tags": ["ok", "b\x00d"]})
        with pytest.raises(ValidationError, match="4096") as e:
            m.add("x", id="big", source="s" * 5000)
        assert e.value.field == "source"
        assert m.stats().documents == before
        # a `lang` that is not a language code is metadata like any other: stored, not used to stem
        m.add("hello list language", id="l1", metadata={"lang": ["en", "fr"]})
        m.add("hello object language", id="l2", metadata={"lang": {"a": 1}})
        assert m.get("l1")["metadata"] == {"lang": ["en", "fr"]}


def test_bad_json_records_are_skipped_one_by_one(tmp_path: Path) -> None:
    f = tmp_path / "recs.jsonl"
    lines = [
        {"id": "ok-1", "text": "a good record"},
        {"id": "x" * 600, "text": "an id over 512 characters"},
        {"id": "src", "text": "a source too long", "source": "s" * 5000},
        {"id": "lang", "text": "a list as lang", "metadata": {"lang": ["en"]}},
        {"id": "num", "text": "a huge number", "n": 10**400},
    ]
    f.write_text("\n".join(json.dumps(x) for x in lines))
    with _mem(tmp_path / "m.db") as m:
        rep = m.ingest_path(f)
    assert sorted(rep.added) == ["lang", "ok-1"]
    reasons = {s.get("id", s["path"])[:10]: s["reason"] for s in rep.skipped}
    assert len(rep.skipped) == 3 and "512" in str(reasons) and "4096" in str(reasons) and "64 bits" in str(reasons)


def test_sqlite_reads_stop_at_the_deadline(tmp_path: Path) -> None:
    with _mem(tmp_path / "m.db") as m:
        m.add_documents([{"id": f"d{i}", "text": f"note {i}", "metadata": {"n": i, "s": f"v{i}"}} for i in range(5000)])
        spec = {"$or": [{"n": {"$gte": i}} for i in range(200)]}
        assert m.search("note", mode="bm25", metadata_filter=spec).results  # no deadline: an answer
        with dl.within(0.0), pytest.raises(dl.DeadlineExceeded):
            m.search("note other", mode="bm25", metadata_filter={"s": {"$ne": "zz"}, **spec})
        # the deadline ends with its block: the next query answers
        assert m.search("note", mode="bm25", top_k=3).results


def test_deadline_is_the_statement_timeout_on_postgres(pg_url: str) -> None:
    with _mem(pg_url) as m:
        store = m.store
        t0 = time.monotonic()
        with dl.within(0.3), pytest.raises(dl.DeadlineExceeded), store._conn() as conn:  # type: ignore[attr-defined]
            conn.execute("SELECT pg_sleep(5)")
        assert time.monotonic() - t0 < 2.5  # stopped by the server, not after the sleep
        with store._conn() as conn:  # type: ignore[attr-defined]
            assert conn.execute("SHOW statement_timeout").fetchone()[0] == "30s"  # back to the default
            assert conn.execute("SHOW work_mem").fetchone()[0] == "32MB"  # each sort or hash is capped


def test_deadline_travels_to_other_threads() -> None:
    import threading

    seen: list[bool] = []
    with dl.within(0.0):
        fn = dl.bind(lambda: seen.append(dl.expired()))
    t = threading.Thread(target=fn)
    t.start()
    t.join()
    assert seen == [True] and not dl.expired()
