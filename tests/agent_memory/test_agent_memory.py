"""Agent memory (issue 17) on both backends: messages and sessions, occurred_at / recorded_at,
time_range, as_of, history that keeps every version, keyed supersession, soft and hard deletes,
the time leg and the context window; bad input is an error naming the field that writes nothing.

The as_of property: random interleavings of add / update / supersede / forget / delete; for every
moment T between two operations, ``as_of=T`` returns exactly what a replay of the log up to T holds
(a hard delete erases a memory from every time: the right to be forgotten)."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hybridmem import Memory
from hybridmem.errors import NotFoundError, ValidationError


def _mem(target: str | Path, namespace: str = "default") -> Memory:
    return Memory(target, embedder="hash", auto_embed=False, namespace=namespace)


def _visible(m: Memory, **kw) -> set[tuple[str, str]]:
    res = m.search("memo", mode="bm25", top_k=1000, **kw)
    assert res.total_retrieved == len(res.results)
    return {(r.doc_id.split("@@v")[0], r.text) for r in res.results}


# ---------------------------------------------------------------- as_of: the property
OPS = st.lists(
    st.tuples(st.sampled_from(["add", "update", "supersede", "forget", "delete"]), st.integers(0, 3)),
    min_size=3,
    max_size=12,
)


def _replay(log: list[tuple[str, str, str]], upto: int, deleted: set[str]) -> set[tuple[str, str]]:
    state: dict[str, str] = {}
    for kind, mid, text in log[:upto]:
        if mid in deleted:
            continue
        if kind in ("add", "update", "supersede"):
            state[mid] = text
        elif kind == "forget":
            state.pop(mid, None)
    return set(state.items())


def _run(m: Memory, ops: list[tuple[str, int]]) -> tuple[list[tuple[str, str, str]], list[float], set[str]]:
    """Apply ``ops`` (skipping the ones that do not apply); returns the log, a moment after each
    applied operation, and the hard-deleted ids."""
    log: list[tuple[str, str, str]] = []
    marks: list[float] = []
    current: set[str] = set()
    known: set[str] = set()
    deleted: set[str] = set()
    for n, (kind, i) in enumerate(ops):
        mid, text = f"m{i}", f"memo {i} version {n}"
        if kind == "add" and mid not in known:
            m.add(text, id=mid)
        elif kind == "update" and mid in current:
            m.update(mid, text)
        elif kind == "supersede" and mid in current:
            m.supersede(mid, text)
        elif kind == "forget" and mid in current:
            m.forget(mid)
        elif kind == "delete" and mid in known and mid not in deleted:
            m.delete(mid)
            deleted.add(mid)
        else:
            continue
        known.add(mid)
        if kind in ("add", "update", "supersede"):
            current.add(mid)
        else:
            current.discard(mid)
        log.append((kind, mid, text))
        time.sleep(0.002)
        marks.append(time.time())
        time.sleep(0.002)
    return log, marks, deleted


def _check_as_of(m: Memory, ops: list[tuple[str, int]]) -> None:
    log, marks, deleted = _run(m, ops)
    for i, t in enumerate(marks, start=1):
        assert _visible(m, as_of=t) == _replay(log, i, deleted), (log[:i], "as_of", i)
    assert _visible(m) == _replay(log, len(log), deleted)
    for mid in {x for _, x, _ in log} - deleted:  # history: one version per write, oldest first
        writes = [t for k, x, t in log if x == mid and k in ("add", "update", "supersede")]
        assert [v["text"] for v in m.history(mid)] == writes


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(OPS)
def test_as_of_replays_the_log_sqlite(tmp_path_factory: pytest.TempPathFactory, ops) -> None:
    with _mem(tmp_path_factory.mktemp("asof") / "m.db") as m:
        _check_as_of(m, ops)


def test_as_of_replays_the_log_postgres(pg_url: str) -> None:
    rng = random.Random(17)
    kinds = ["add", "update", "supersede", "forget", "delete"]
    with _mem(pg_url) as m:
        for round_ in range(6):  # 6 interleavings, each in its own namespace of the same database
            ops = [(rng.choice(kinds), rng.randrange(4)) for _ in range(rng.randrange(4, 13))]
            with _mem(pg_url, f"asof{round_}") as mr:
                _check_as_of(mr, ops)
        assert m.stats().documents == 0


# ---------------------------------------------------------------- history, keys, deletes
def test_update_keeps_history_on_every_leg(target: str | Path) -> None:
    with _mem(target) as m:
        m.add("memo the billing pool has 20 connections", id="pool")
        m.add("memo an unrelated note about lunch", id="lunch")
        t = time.time()
        time.sleep(0.01)
        m.update("pool", "memo the billing pool has 50 connections")
        m.embed_pending()
        for mode in ("bm25", "vector", "hybrid"):
            texts = [r.text for r in m.search("billing pool connections", mode=mode, top_k=10).results]
            assert "memo the billing pool has 20 connections" not in texts, mode
            assert "memo the billing pool has 50 connections" in texts, mode
            old = m.search("billing pool connections", mode=mode, top_k=10, as_of=t).results
            assert [r.text for r in old if r.doc_id.startswith("pool")] == ["memo the billing pool has 20 connections"]
        every = m.search("billing pool", mode="bm25", include_superseded=True).results
        by_version = {r.version: r for r in every if r.doc_id.startswith("pool")}
        assert set(by_version) == {1, 2} and by_version[1].valid_to is not None and by_version[2].valid_to is None
        h = m.history("pool")
        assert [v["version"] for v in h] == [1, 2] and [v["current"] for v in h] == [False, True]
        assert h[0]["valid_to"] == h[1]["recorded_at"]
        assert m.stats().documents == 2  # current memories; the old version is history


def test_a_key_supersedes_its_holder_in_its_scope(target: str | Path) -> None:
    with _mem(target) as m:
        m.add("memo the user lives in Porto", metadata={"user_id": "u1"}, key="user.city")
        m.add("memo the other user lives in Oslo", metadata={"user_id": "u2"}, key="user.city")
        m.add("memo the user lives in Lisbon", metadata={"user_id": "u1"}, key="user.city")
        assert {t for _, t in _visible(m)} == {"memo the user lives in Lisbon", "memo the other user lives in Oslo"}
        lisbon = m.search("Lisbon", mode="bm25").results[0]
        assert [v["text"] for v in m.history(lisbon.doc_id)] == [
            "memo the user lives in Porto",
            "memo the user lives in Lisbon",
        ]
        assert {t for _, t in _visible(m, user_id="u1")} == {"memo the user lives in Lisbon"}


def test_an_id_written_again_after_its_versions_were_retired_continues_their_numbering(target: str | Path) -> None:
    """A memory superseded under its key, written again under its own id, superseded again: its
    versions are numbered on (the second retirement used to collide with ``city@@v1``: the write
    was rejected with a UNIQUE-constraint error)."""
    with _mem(target) as m:
        m.add("memo Caroline lives in Lisbon", id="city", key="user.city")
        m.add("memo Caroline lives in Porto", id="city2", key="user.city")
        m.add("memo Caroline lives in Lisbon again", id="city", key="user.city")
        m.add("memo Caroline lives in Porto again", id="city2", key="user.city")
        assert [(v["id"], v["version"], v["current"]) for v in m.history("city")] == [
            ("city@@v1", 1, False),
            ("city@@v2", 2, False),
        ]
        assert [(v["version"], v["current"]) for v in m.history("city2")] == [(1, False), (2, True)]
        m.forget("city2")
        m.add("memo Caroline lives in Porto for good", id="city2")
        assert [v["version"] for v in m.history("city2")] == [1, 2, 3]
        assert {t for _, t in _visible(m)} == {"memo Caroline lives in Porto for good"}


def test_forget_is_soft_and_delete_is_for_good(target: str | Path) -> None:
    with _mem(target) as m:
        m.add("memo a secret", id="s")
        t = time.time()
        time.sleep(0.01)
        m.forget("s")
        assert _visible(m) == set()
        assert _visible(m, as_of=t) == {("s", "memo a secret")}
        with pytest.raises(NotFoundError):
            m.update("s", "memo again")
        m.delete("s")
        assert _visible(m, as_of=t) == set() and _visible(m, include_superseded=True) == set()
        with pytest.raises(NotFoundError):
            m.history("s")


# ---------------------------------------------------------------- messages, scopes, time
CHAT = [
    {
        "role": "user",
        "name": "Ana",
        "content": "Let's size the billing pool at 40.",
        "timestamp": "2023-05-02T09:00:00Z",
    },
    {"role": "user", "name": "Bo", "content": "Agreed, 40 for the billing pool.", "timestamp": "2023-05-02T09:01:00Z"},
    {"role": "assistant", "content": "Noted the pool size.", "timestamp": "2023-05-02T09:02:00"},  # naive = UTC
    {
        "role": "user",
        "name": "Ana",
        "content": "The billing pool is at 40 since the change.",
        "timestamp": "2023-05-16T10:00:00Z",
    },
]


def test_messages_become_turns_with_speaker_session_and_time(target: str | Path) -> None:
    with _mem(target) as m:
        r = m.add_messages(CHAT[:2], session_id="s1", user_id="u1")
        assert r.added == ["s1:0", "s1:1"]
        m.add_messages(CHAT[2:], session_id="s1", user_id="u1")  # turns continue after the last one
        m.add_messages([{"role": "user", "content": "billing pool elsewhere"}], session_id="s2", user_id="u2")
        res = m.search("billing pool", mode="bm25", session_id="s1", top_k=10)
        assert {x.session_id for x in res.results} == {"s1"}
        third = m.get("s1:2")
        assert third["metadata"]["turn"] == 2 and third["metadata"]["speaker"] == "assistant"
        assert third["occurred_at"] == "2023-05-02T09:02:00.000Z"
        top = res.results[0]
        assert top.turn is not None and top.speaker in ("Ana", "Bo") and top.occurred_at.startswith("2023-05")
        assert m.search("billing pool", mode="bm25", session_id=["s1", "s2"], top_k=10).total_retrieved == 5
        assert {x.session_id for x in m.search("billing", mode="bm25", user_id="u2").results} == {"s2"}


def test_time_range_and_the_time_leg(target: str | Path) -> None:
    with _mem(target) as m:
        m.add_messages(CHAT, session_id="s1")
        m.embed_pending()
        res = m.search("billing pool", mode="bm25", time_range={"from": "2023-05-10", "to": "2023-06-01"})
        assert [x.doc_id for x in res.results] == ["s1:3"]
        # "two weeks ago", from the conversation's last message (16 May): the week of 2 May ranks first
        q = "what did we decide about the billing pool two weeks ago"
        res = m.search(q, session_id="s1", top_k=4)
        assert "time" in res.legs and res.results[0].doc_id in ("s1:0", "s1:1")
        assert res.results[0].ranks.get("time") == 1
        # soft: the out-of-range turn is still returned, only lower
        assert "s1:3" in [x.doc_id for x in res.results]
        plain = m.search(q, session_id="s1", top_k=4, hybrid_params={"time_weight": 0})
        assert "time" not in plain.legs


def test_context_window_returns_the_neighbouring_turns(target: str | Path) -> None:
    with _mem(target) as m:
        m.add_messages(CHAT, session_id="s1")
        res = m.search("Noted the pool size", mode="bm25", top_k=1, context_window={"before": 1, "after": 1})
        hit = res.results[0]
        assert hit.doc_id == "s1:2"
        assert [c["turn"] for c in hit.context] == [1, 2, 3]
        assert hit.context[0]["speaker"] == "Bo" and hit.context[1]["text"].startswith("assistant:")


@pytest.mark.parametrize(
    ("messages", "field"),
    [
        ([{"role": "user", "content": ""}], "messages[0].content"),
        ([{"role": "user", "content": "ok"}, {"role": 3, "content": "x"}], "messages[1].role"),
        ([{"role": "user", "content": "x", "timestamp": "last tuesday-ish"}], "messages[0].timestamp"),
        ([{"role": "user", "content": "x", "metadata": {"turn": 9}}], "messages[0].metadata"),
        ([{"content": "x"}], "messages[0].role"),
        ([], "messages"),
    ],
)
def test_a_bad_message_is_named_and_nothing_is_written(tmp_path: Path, messages: list, field: str) -> None:
    with _mem(tmp_path / "m.db") as m:
        with pytest.raises(ValidationError) as e:
            m.add_messages(messages, session_id="s1")
        assert e.value.field == field
        assert m.stats().documents == 0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"time_range": {"from": "2023-06-01", "to": "2023-05-01"}}, "time_range"),
        ({"time_range": {}}, "time_range"),
        ({"as_of": "2999-01-01T00:00:00Z"}, "as_of"),
        ({"as_of": "not a time"}, "as_of"),
        ({"session_id": "nope"}, "session_id"),
        ({"user_id": "nobody"}, "user_id"),
        ({"context_window": {"before": 99}}, "context_window.before"),
    ],
)
def test_bad_time_and_scope_requests_name_the_field(tmp_path: Path, kwargs: dict, field: str) -> None:
    with _mem(tmp_path / "m.db") as m:
        m.add_messages(CHAT[:1], session_id="s1", user_id="u1")
        with pytest.raises(ValidationError) as e:
            m.search("billing", **kwargs)
        assert e.value.field == field


@pytest.mark.parametrize(
    ("scope", "field"),
    [({"session_id": "a\x00b"}, "session_id"), ({"session_id": "s", "user_id": "\ud800"}, "user_id")],
)
def test_a_bad_scope_id_is_refused_before_the_store(target: str | Path, scope: dict, field: str) -> None:
    with _mem(target) as m:
        with pytest.raises(ValidationError) as e:
            m.add_messages([{"role": "user", "content": "x"}], **scope)
        assert e.value.field == field and m.stats().documents == 0
        with pytest.raises(ValidationError):
            m.search("x", user_id="a\x00b")


def test_ids_of_past_versions_are_reserved(tmp_path: Path) -> None:
    with _mem(tmp_path / "m.db") as m, pytest.raises(ValidationError, match="reserved"):
        m.add("x", id="a@@v1")


def test_scopes_stay_in_their_namespace(target: str | Path) -> None:
    with _mem(target) as a, _mem(target, "other") as b:
        a.add_messages(CHAT[:2], session_id="s1", user_id="u1")
        b.add_messages([{"role": "user", "content": "billing pool in the other tenant"}], session_id="s1")
        assert {x.doc_id for x in a.search("billing pool", mode="bm25", session_id="s1").results} == {"s1:0", "s1:1"}
        assert [x.text for x in b.search("billing pool", mode="bm25", session_id="s1").results] == [
            "user: billing pool in the other tenant"
        ]
        with pytest.raises(ValidationError):
            b.search("billing", user_id="u1")  # u1 exists only in the default namespace
