"""Listing memories page by page (issue 43): every order walks every memory once, in order, on both
backends; a walk interleaved with adds, updates, soft and hard deletes neither skips nor repeats a
memory present for the whole walk; filters, scopes, as_of and superseded versions as a query's; a
cursor of another namespace, filter or order, or altered, is a ValidationError naming ``cursor``;
and GET /v1/memories over real HTTP answers the same pages, a bad cursor or limit a 422."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from hybridmem import Memory
from hybridmem.errors import ValidationError
from server_utils import LiveServer


def _walk(m: Memory, limit: int, between=None, **fields):  # type: ignore[no-untyped-def]
    seen, cursor, pages = [], None, 0
    while True:
        page = m.list(cursor, limit, **fields)
        seen += [r["doc_id"] for r in page.memories]
        pages += 1
        if between is not None:
            between(pages)
        cursor = page.next_cursor
        if cursor is None:
            return seen


def _fill(m: Memory, n: int) -> None:
    m.add_documents(
        [{"id": f"m{i:03d}", "text": f"memory number {i}", "metadata": {"team": "ab"[i % 2]}} for i in range(n)]
    )


@pytest.mark.parametrize(("order", "descending"), [("recorded_at", False), ("id", True), ("occurred_at", False)])
def test_every_order_walks_every_memory_once(target: str | Path, order: str, descending: bool) -> None:
    with Memory(target, embedder="hash", auto_embed=False) as m:
        _fill(m, 23)
        got = _walk(m, 5, order=order, descending=descending)
        ids = [f"m{i:03d}" for i in range(23)]
        assert got == (sorted(ids, reverse=True) if descending else ids) if order == "id" else sorted(got) == ids
        assert len(got) == len(set(got)) == 23
        assert _walk(m, 4, metadata_filter={"team": "b"}) == [f"m{i:03d}" for i in range(1, 23, 2)]
        assert m.list(limit=1000).count == 23 and m.list(limit=1000).next_cursor is None


def test_a_walk_under_concurrent_writes_never_skips_or_repeats_a_memory_present_throughout(target: str | Path) -> None:
    for seed in range(3):
        rng = random.Random(seed)
        with Memory(target, embedder="hash", auto_embed=False, namespace=f"walk{seed}") as m:
            _fill(m, 40)
            touched: set[str] = set()
            n_new = [0]

            def write(_: int) -> None:
                for _ in range(3):
                    op, victim = rng.choice(["add", "update", "forget", "delete"]), f"m{rng.randrange(40):03d}"
                    if op == "add":
                        n_new[0] += 1
                        m.add(f"new memory {n_new[0]}", id=f"n{seed}-{n_new[0]:03d}")
                    elif victim in touched:
                        continue
                    elif op == "update":
                        m.update(victim, f"changed {victim}")  # stays present: a new version
                    else:
                        touched.add(victim)  # gone during the walk: may or may not be seen
                        m.forget(victim) if op == "forget" else m.delete(victim)

            for order in ("recorded_at", "id"):
                got = _walk(m, 6, between=write, order=order)
                assert len(got) == len(set(got)), f"repeated in a walk by {order}"
                present = {f"m{i:03d}" for i in range(40)} - touched
                assert present <= set(got), f"skipped in a walk by {order}: {sorted(present - set(got))}"


def test_scopes_as_of_and_superseded_versions_as_a_query_has_them(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder="hash", auto_embed=False) as m:
        m.remember("likes tea", user_id="u1", id="pref")
        m.remember("lives in Lyon", user_id="u2", id="home")
        before = time.time()
        time.sleep(0.01)
        m.update("pref", "likes coffee")
        assert [r["doc_id"] for r in m.list(user_id="u1").memories] == ["pref"]
        assert m.list(user_id="u1").memories[0]["chunks"][0]["text"] == "likes coffee"
        then = m.list(user_id="u1", as_of=before).memories
        assert [r["chunks"][0]["text"] for r in then] == ["likes tea"]
        every = [r["doc_id"] for r in m.list(include_superseded=True, order="id").memories]
        assert every == ["home", "pref", "pref@@v1"]


def test_a_foreign_altered_or_mismatched_cursor_is_refused_naming_it(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder="hash", auto_embed=False) as m:
        _fill(m, 5)
        m.add("elsewhere", id="x", namespace="other")
        cursor = m.list(limit=2).next_cursor
        assert cursor is not None
        for kwargs, says in [
            ({"namespace": "other"}, "another namespace"),
            ({"order": "id"}, "another filter"),
            ({"metadata_filter": {"team": "a"}}, "another filter"),
        ]:
            with pytest.raises(ValidationError, match=says) as e:
                m.list(cursor, 2, **kwargs)
            assert e.value.field == "cursor"
        altered = cursor[:10] + ("A" if cursor[10] != "A" else "B") + cursor[11:]
        with pytest.raises(ValidationError) as e:
            m.list(altered, 2)
        assert e.value.field == "cursor"
        for bad in (0, 1001, True):
            with pytest.raises(ValidationError) as e:
                m.list(limit=bad)
            assert e.value.field == "limit"
        with pytest.raises(ValidationError):
            m.list(order="size")


def test_get_v1_memories_pages_over_http(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder="hash", auto_embed=False) as m, LiveServer(m) as srv, srv.client() as c:
        _fill(m, 7)
        first = c.get("/v1/memories", params={"limit": 3, "order": "id"}).json()
        assert [r["doc_id"] for r in first["memories"]] == ["m000", "m001", "m002"] and first["count"] == 3
        rest = c.get("/v1/memories", params={"limit": 10, "order": "id", "cursor": first["next_cursor"]}).json()
        assert [r["doc_id"] for r in rest["memories"]] == [f"m{i:03d}" for i in range(3, 7)] and rest[
            "next_cursor"
        ] is None
        flt = c.get("/v1/memories", params={"filter": '{"team": "a"}', "order": "id"}).json()
        assert [r["doc_id"] for r in flt["memories"]] == ["m000", "m002", "m004", "m006"]
        for params, field in [
            ({"cursor": "garbage"}, "cursor"),
            ({"limit": 1001}, "limit"),
            ({"filter": "{not json"}, "filter"),
            ({"order": "size"}, "order"),
        ]:
            r = c.get("/v1/memories", params=params)
            assert r.status_code == 422 and field in r.text, (params, r.text)
        other = c.get("/v1/memories", params={"cursor": first["next_cursor"], "order": "id", "namespace": "x"})
        assert other.status_code == 422 and "another namespace" in other.text
