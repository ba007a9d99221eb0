"""Issue 45, item 4 (its correctness half): with synchronous replication (``synchronous_standby_names``,
``synchronous_commit = remote_apply``), SIGKILL the primary under a write load, promote the replica
(``pg_ctl promote``): the writers' ``Memory``, on a URL naming both servers with
``target_session_attrs=read-write``, writes on to the new primary; every write that was acknowledged
is there, the embedding queue left pending is embedded there, and the graph built on the old
primary is updated on the new one. One failover here (a new primary + replica pair costs
~7 s); the window without synchronous replication is not measured here."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from hybridmem import Memory

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


@pytest.fixture()
def cluster() -> Any:
    from pg_cluster import start_or_skip

    c = start_or_skip()
    try:
        yield c
    finally:
        c.close()


def test_failover_loses_no_acknowledged_write(cluster: Any) -> None:
    cluster.make_synchronous()
    # both servers in one URL, the writable one chosen (libpq's target_session_attrs): after the
    # promotion the pool's new connections reach the new primary, the same Memory writes on
    both = f"host={cluster.primary.sock},{cluster.replica.sock}&port=5432,5432&target_session_attrs=read-write"
    url = f"postgresql://postgres@/mem?{both}"
    acked: list[str] = []
    failed: list[str] = []
    stop = threading.Event()
    promoted = threading.Event()
    after: list[str] = []  # acknowledged after the promotion
    # short timeouts: a writer stuck on the dead primary gives up within seconds
    opts = {"statement_timeout_ms": 2000, "connect_timeout": 1}
    mem = Memory(url, embedder="hash", auto_embed=False, store_options=opts)
    mem.add("the first memory, before the load", id="seed")
    mem.add("auth-service calls billing-service through redis-prod-01", id="graph-seed")
    mem.embed_pending()
    mem.graph.build()  # a graph on the old primary; updated on the new one below

    def writer(w: int) -> None:
        i = 0
        while not stop.is_set():
            doc_id = f"w{w}-{i}"
            i += 1
            try:
                mem.add(f"memory number {i} of the failover test", id=doc_id, metadata={"i": i})
            except Exception:  # noqa: BLE001 - the primary is gone: not acknowledged
                failed.append(doc_id)
                time.sleep(0.02)
                continue
            acked.append(doc_id)
            if promoted.is_set():
                after.append(doc_id)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(2)]
    try:
        for t in threads:
            t.start()
        end = time.monotonic() + 20
        while len(acked) < 60 and time.monotonic() < end:
            time.sleep(0.01)
        cluster.primary.kill()  # SIGKILL, mid-load
        time.sleep(0.3)
        cluster.replica.promote()
        promoted.set()
        end = time.monotonic() + 30
        while len(after) < 20 and time.monotonic() < end:
            time.sleep(0.05)
        stop.set()
        for t in threads:
            t.join(timeout=30)
        assert len(acked) >= 80 and len(after) >= 20, (len(acked), len(after), len(failed))
        # the queue left pending across the failover (auto_embed off: every memory after the seed)
        pending = mem.store.pending_count()
        assert pending >= len(acked)
        assert mem.embed_pending() == pending and mem.store.pending_count() == 0
        # the graph built on the old primary goes on on the new one: its update takes the new chunks
        before = mem.graph.status()
        assert before.built and before.chunks_pending >= len(acked)
        assert mem.graph.update().chunks_extracted == before.chunks_pending
        assert mem.graph.status().chunks_pending == 0
        assert "billing-service" in {r["target"] for r in mem.graph.show("auth-service")["relations_out"]}
    finally:
        stop.set()
        mem.close()
    with Memory(cluster.replica.url("mem"), embedder="hash", auto_embed=False) as new:
        held = {m["doc_id"] for m in new.list(limit=1000).memories}
        lost = [d for d in acked if d not in held]
        assert not lost, f"{len(lost)} of {len(acked)} acknowledged writes lost: {lost[:10]}"
        assert "seed" in held
        assert new.stats().vectors == new.stats().chunks  # every chunk embedded on the new primary
        new.add("written on the new primary", id="after")
        assert new.search("written on the new primary").results[0].doc_id == "after"


def test_a_commit_whose_replica_wait_was_cancelled_is_not_acknowledged(cluster: Any) -> None:
    """PostgreSQL reports a commit whose wait for the synchronous replica was cancelled as done,
    with a warning ("might not have been replicated"): the store refuses to acknowledge it."""
    from hybridmem.errors import StoreUnavailableError

    cluster.make_synchronous()
    with Memory(cluster.primary.url("mem"), embedder="hash", auto_embed=False) as mem:
        mem.add("replicated", id="ok")
        cluster.replica.sql("SELECT pg_wal_replay_pause()")  # remote_apply now waits
        outcome: list[BaseException | None] = []

        def write() -> None:
            try:
                mem.add("not replicated", id="unconfirmed")
                outcome.append(None)
            except BaseException as e:  # noqa: BLE001 - what the writer saw
                outcome.append(e)

        t = threading.Thread(target=write)
        t.start()
        try:
            waiting = "SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep'"
            end = time.monotonic() + 10
            while not (pids := cluster.primary.sql(waiting)):
                assert time.monotonic() < end, "the write never waited for its replica"
                time.sleep(0.02)
            cluster.primary.sql(f"SELECT pg_cancel_backend({pids[0][0]})")
            t.join(timeout=10)
        finally:
            cluster.replica.sql("SELECT pg_wal_replay_resume()")
        assert len(outcome) == 1 and isinstance(outcome[0], StoreUnavailableError), outcome
        assert "synchronous replica" in str(outcome[0])
