"""Namespaces are a hard boundary on every leg and endpoint: hypothesis writes random data (the same
ids included) to two namespaces through two restricted keys, then checks every query mode, GET,
stats, answers, uploads and deletes from each side."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hybridmem import Memory
from hybridmem.server.config import ServerConfig
from server_utils import LiveServer, assert_error

KEYS = {"key-alpha-0001": ("alpha",), "key-beta-00001": ("beta",)}
MARK = {"alpha": "alphamark", "beta": "betamark"}
WORDS = [
    "pool",
    "timeout",
    "HEL-4040",
    "gateway",
    "cache",
    "purge",
    "billing",
    "max_connections",
    "HTTP",
    "504",
    "replica",
    "shard",
    "tenant",
    "secret",
    "token",
    "redis",
    "kafka",
    "lag",
    "disk",
    "full",
]
MODES = ("bm25", "vector", "hybrid", "rerank")

# what each namespace holds now: id -> text (one chunk each: texts are short)
STATE: dict[str, dict[str, str]] = {"alpha": {}, "beta": {}}


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def clients(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, httpx.Client]]:
    """A live server over each backend in turn (the same checks hold on SQLite and PostgreSQL)."""
    url = None
    if request.param == "postgres":
        from pg_utils import server

        url = server().new_database()
    target = url or tmp_path_factory.mktemp("tenancy") / "m.db"
    for held in STATE.values():
        held.clear()
    mem = Memory(target, embedder="hash", auto_embed=True)
    request.addfinalizer(lambda: url and __import__("pg_utils").server().drop_database(url))
    with LiveServer(mem, ServerConfig(api_keys=KEYS)) as srv:
        cs = {"alpha": srv.client("key-alpha-0001"), "beta": srv.client("key-beta-00001")}
        cs["mem"] = mem  # type: ignore[assignment]
        yield cs
        for c in cs.values():
            if isinstance(c, httpx.Client):
                c.close()
    mem.close()


docs_st = st.lists(
    st.tuples(
        st.sampled_from([f"m{i}" for i in range(8)]),  # few ids: both namespaces reuse them
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=8),
    ),
    min_size=1,
    max_size=5,
)


def _check_results(ns: str, body: dict) -> None:
    other = "beta" if ns == "alpha" else "alpha"
    assert body["namespace"] == ns
    for r in body["results"]:
        assert MARK[other] not in r["text"], (ns, r)
        assert STATE[ns].get(r["doc_id"]) == r["text"], (ns, r, STATE[ns].get(r["doc_id"]))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    alpha=docs_st,
    beta=docs_st,
    queries=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4), min_size=1, max_size=3),
    delete_one=st.booleans(),
)
def test_namespaces_never_leak(clients: dict, alpha: list, beta: list, queries: list, delete_one: bool) -> None:
    for ns, docs in (("alpha", alpha), ("beta", beta)):
        batch = [
            {"id": i, "text": " ".join([MARK[ns], *words]), "metadata": {"tenant": ns, "n": len(words)}}
            for i, words in docs
        ]
        r = clients[ns].post("/v1/memories", json={"memories": batch})
        assert r.status_code == 200, r.text
        for d in batch:
            STATE[ns][d["id"]] = d["text"]
    if delete_one:  # deleting an id both namespaces hold removes it from one side only
        victim = alpha[0][0]
        assert clients["alpha"].delete(f"/v1/memories/{victim}").status_code == 200
        STATE["alpha"].pop(victim)
    clients["mem"].wait_for_vectors()

    texts = [" ".join(q) for q in queries] + [f"{MARK['alpha']} {MARK['beta']} secret"]
    for ns in ("alpha", "beta"):
        c = clients[ns]
        other = "beta" if ns == "alpha" else "alpha"
        for text in texts:
            for mode in MODES:
                r = c.post("/v1/query", json={"search_text": text, "mode": mode, "top_k": 20})
                assert r.status_code == 200, r.text
                _check_results(ns, r.json())
            # filters are per namespace too: the other tenant's metadata value matches nothing here
            r = c.post("/v1/query", json={"search_text": text, "metadata_filter": {"tenant": other}})
            assert r.status_code == 200 and r.json()["results"] == []
        # every stored id reads back this namespace's text, never the other's
        for doc_id, text in STATE[ns].items():
            got = c.get(f"/v1/memories/{doc_id}")
            assert got.status_code == 200 and got.json()["chunks"][0]["text"] == text
        for doc_id in set(STATE[other]) - set(STATE[ns]):
            assert_error(c.get(f"/v1/memories/{doc_id}"), 404, "not_found")
        stats = c.get("/v1/stats").json()
        assert stats["documents"] == len(STATE[ns]) and stats["namespaces"] == [ns]
        ans = c.post("/v1/answer", json={"question": texts[-1], "top_k": 10})
        if ans.status_code == 200:
            _check_results(ns, ans.json())
            assert MARK[other] not in ans.json()["answer"]
        else:
            assert_error(ans, 501)
        # the other tenant's namespace is refused on every endpoint
        assert_error(c.post("/v1/query", json={"search_text": "x", "namespace": other}), 403, "forbidden")
        assert_error(c.get("/v1/memories/m0", params={"namespace": other}), 403, "forbidden")
        assert_error(c.get("/v1/stats", params={"namespace": other}), 403, "forbidden")


def test_uploads_stay_in_their_namespace(clients: dict) -> None:
    files = [("files", ("upl.md", f"{MARK['beta']} uploaded runbook zyxxel".encode(), "text/markdown"))]
    r = clients["beta"].post("/v1/documents", files=files)
    assert r.status_code == 200 and r.json()["namespace"] == "beta"
    STATE["beta"]["upl"] = f"{MARK['beta']} uploaded runbook zyxxel"
    clients["mem"].wait_for_vectors()
    for mode in MODES:
        hits = clients["alpha"].post("/v1/query", json={"search_text": "zyxxel uploaded", "mode": mode}).json()
        assert all(h["doc_id"] != "upl" for h in hits["results"])
        _check_results("alpha", hits)
    hits = clients["beta"].post("/v1/query", json={"search_text": "zyxxel", "mode": "bm25"}).json()["results"]
    assert [h["doc_id"] for h in hits] == ["upl"]
    assert_error(clients["alpha"].get("/v1/memories/upl"), 404)
