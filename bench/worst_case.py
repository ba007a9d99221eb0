"""Worst-case requests under a short deadline: memory bound, every request ends in time, the work stops.

    python -m bench worst_case                                  # SQLite then PostgreSQL, 5000 docs, 30 s each
    python -m bench worst_case --backend sqlite --docs 500 --seconds 5   # quick
    python -m bench worst_case --in-values 990                  # $in lists just under SQLite's expression depth

``hybridmem serve`` runs in its own process (``--embedder hash``: this measures the service, not the
model) with ``request_timeout`` set to ``--deadline`` (default 2 s), on a fresh SQLite store file,
then on a database of an embedded PostgreSQL (``tests/pg_utils.py``). It is filled over HTTP with
``--docs`` documents whose metadata is at the budget of ``hybridmem.config``: 256 keys
(``MAX_METADATA_KEYS``), about ``MAX_METADATA_BYTES`` of JSON, three strings of up to
``MAX_METADATA_VALUE_CHARS``. Then ``--clients`` (8 = ``max_concurrent_per_tenant``) clients on one
key send worst-case requests back to back for ``--seconds``: hybrid, ``top_k`` = the server's
``max_top_k``, ``fetch_k`` = 10x it, common words (BM25 matches most chunks), and a filter at the
budget of ``hybridmem.filters``: an ``$or`` of ``MAX_CONDITIONS`` conditions, three of them ``$in``
lists of ``--in-values`` (default ``MAX_IN_VALUES``) values, over the large metadata; every
request's values are fresh, so no filter cache helps.

Measured: the server's VmRSS (and RssAnon) every 50 ms from ``/proc/<pid>/status``, idle (after the
fill and one ordinary query) and peak; for PostgreSQL also the sum over its processes (postmaster
and backends); every request's wall time and status (each must end within deadline + 1 s, as an
answer, a 504 or a 429); and whether the work stopped: the server's CPU time (``/proc/<pid>/stat``
utime + stime; for PostgreSQL, summed over its client backends, and reported for all its processes
with the tail's CPU per process title) must stop rising within 1 s of the last response (rising =
more than the idle rate + 20 ms of CPU in the next second). Target: RSS peak <= 1 GB above idle.
Results: ``bench/results/worst-case/``. Exit status 1 when a target is missed or a request got
another status.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]

# hybridmem comes in through bench.fuzz first: from PYTHONPATH when set, this checkout's src/ otherwise
from bench._common import make_corpus, make_queries  # noqa: E402
from bench.fuzz import Postgres, Serve, code_info, proc_cpu_s, proc_rss_kb  # noqa: E402
from bench.load import pct  # noqa: E402
from hybridmem import config as hm_config  # noqa: E402
from hybridmem import filters as hm_filters  # noqa: E402

KEY = "bench-worst-key-0001"
NS = "worst"
MAX_TOP_K = 100  # the server's default max_top_k
RSS_TARGET_MB = 1024
LONG_KEYS = ("k253", "k254", "k255")


def limit_metadata(i: int) -> dict:
    """Metadata of document ``i`` at the budget: 256 keys, just under MAX_METADATA_BYTES of JSON."""
    meta: dict = {"environment": ("production", "staging", "dev")[i % 3], "service": f"svc-{i % 20}", "severity": i % 4}
    for j in range(253 - len(LONG_KEYS)):
        meta[f"k{j:03d}"] = f"v{(i * 7 + j) % 1000}" if j % 2 else (i * 31 + j) % 100_000
    size = len(json.dumps(meta, ensure_ascii=False)) + sum(len(f', "{k}": ""') for k in LONG_KEYS)
    room = (hm_config.MAX_METADATA_BYTES - 64 - size) // len(LONG_KEYS)
    for k in LONG_KEYS:
        meta[k] = (f"{k} of doc {i} " * 400)[: min(room, hm_config.MAX_METADATA_VALUE_CHARS)]
    return meta


def fill(url: str, docs: int) -> float:
    t0 = time.perf_counter()
    corpus = make_corpus(docs)
    with httpx.Client(base_url=url, headers={"X-API-Key": KEY}, timeout=300) as c:
        for i in range(0, docs, 40):  # 40 x 16 KiB per request: under max_body_bytes
            batch = [{**d, "metadata": limit_metadata(i + n)} for n, d in enumerate(corpus[i : i + 40])]
            c.post("/v1/memories", json={"memories": batch}).raise_for_status()
        while c.get("/v1/stats").json().get("pending_vectors"):
            time.sleep(0.5)
    return round(time.perf_counter() - t0, 1)


def worst_filter(rng: random.Random, in_values: int) -> dict:
    """MAX_CONDITIONS conditions under one ``$or``, three ``$in`` lists, within MAX_FILTER_VALUES;
    almost every branch is false for almost every document (nothing short-circuits), the last one
    matches a third. The ``$in`` branches come last: SQLite's OR chain is left-deep."""
    n_in = len(LONG_KEYS)
    singles = []
    for j in range(hm_filters.MAX_CONDITIONS - n_in - 1):
        key = f"k{j % 250:03d}"
        r = rng.randrange(4)
        if r == 0:
            singles.append({key: f"v{rng.randrange(10**9)}"})
        elif r == 1:
            singles.append({key: {"$gt": 10**12 + rng.randrange(10**6)}})
        elif r == 2:
            singles.append({key: {"$lt": -rng.randrange(1, 10**6)}})
        else:
            singles.append({key: {"$in": [f"x{rng.randrange(10**9)}", rng.randrange(10**6) + 10**7]}})
    lists = [
        {f"k{2 * j + 1:03d}": {"$in": [f"w{rng.randrange(10**9)}" for _ in range(in_values)]}} for j in range(n_in)
    ]
    flt = {"$or": [*singles, {"environment": "production"}, *lists]}
    hm_filters.parse_filter(flt)  # within the budget: the parser must accept it
    return flt


async def worst_load(url: str, clients: int, seconds: float, deadline: float, in_values: int, seed: int) -> tuple:
    """(start, end, status or exception name) of every request, times on time.monotonic(); and one
    error message per unexpected status."""
    queries = make_queries(500, seed=seed)
    events: list[tuple[float, float, object]] = []
    examples: dict[str, str] = {}  # one message per unexpected status
    stop_at = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    headers = {"X-API-Key": KEY}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=deadline + 30, limits=limits) as c:

        async def client(n: int) -> None:
            rng = random.Random(seed * 100 + n)
            while time.monotonic() < stop_at:
                body = {
                    "search_text": " ".join(rng.sample(queries, 3)),
                    "top_k": MAX_TOP_K,
                    "fetch_k": 10 * MAX_TOP_K,
                    "mode": "hybrid",
                    "metadata_filter": worst_filter(rng, in_values),
                }
                t = time.monotonic()
                try:
                    r = await c.post("/v1/query", json=body)
                    outcome: object = r.status_code
                    if r.status_code not in (200, 429, 504):
                        err = r.json().get("error", {}) if "json" in r.headers.get("content-type", "") else {}
                        outcome = f"{r.status_code} {err.get('type')}"
                        examples.setdefault(outcome, str(err.get("message"))[:300])
                except httpx.HTTPError as e:
                    outcome = type(e).__name__
                events.append((t, time.monotonic(), outcome))

        await asyncio.gather(*(client(n) for n in range(clients)))
    return events, examples


class Sampler(threading.Thread):
    """Every ``period`` s: (t, server VmRSS kB, RssAnon kB, CPU s, PostgreSQL VmRSS kB, RssAnon kB,
    CPU s, CPU s of its client backends); PostgreSQL sums are over all its processes. ``pg_cpu``:
    each sample's CPU s per PostgreSQL process, ``titles``: each process's title."""

    def __init__(self, pid: int, pg: Postgres | None, period: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.pid, self.pg, self.period = pid, pg, period
        self.samples: list[tuple[float, ...]] = []
        self.pg_cpu: list[dict[int, float]] = []
        self.titles: dict[int, str] = {}
        self.halt = threading.Event()

    def run(self) -> None:
        pg_pids: list[int] = []
        scanned = 0.0
        while not self.halt.is_set():
            t = time.monotonic()
            if self.pg is not None and t - scanned > 0.5:  # backends come and go
                pg_pids, scanned = self.pg.pids(), t
                for p in pg_pids:
                    self.titles.setdefault(p, process_title(p))
            pid = self.pid
            pg = {p: (proc_rss_kb(p), proc_rss_kb(p, "RssAnon"), proc_cpu_s(p)) for p in pg_pids}
            server = (proc_rss_kb(pid), proc_rss_kb(pid, "RssAnon"), proc_cpu_s(pid))
            totals = [sum(x[i] for x in pg.values()) for i in range(3)]
            clients = sum(x[2] for p, x in pg.items() if "[local]" in self.titles.get(p, ""))
            self.samples.append((t, *server, *totals, clients))
            self.pg_cpu.append({p: x[2] for p, x in pg.items()})
            self.halt.wait(self.period)

    def between(self, a: float, b: float) -> list[tuple[float, ...]]:
        return [s for s in self.samples if a <= s[0] <= b]

    def tail_by_process(self, t_last: float) -> dict[str, float]:
        """CPU s each PostgreSQL process used after ``t_last`` (by process title), the busiest first."""
        i = next((k for k, s in enumerate(self.samples) if s[0] >= t_last), len(self.samples) - 1)
        first, used = self.pg_cpu[i], Counter()
        for snap in self.pg_cpu[i:]:
            for p, cpu in snap.items():
                used[f"{p} {self.titles.get(p, '?')}"] = max(
                    used[f"{p} {self.titles.get(p, '?')}"], cpu - first.get(p, 0.0)
                )
        return {k: round(v, 2) for k, v in used.most_common(6) if v > 0}


def process_title(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()[:80]
    except OSError:
        return "?"


def cpu_stop_delay(samples: list[tuple[float, ...]], col: int, t_last: float, idle_rate: float) -> float | None:
    """Seconds from ``t_last`` until the CPU time in column ``col`` stops rising: the first sample
    after which the next second adds no more than the idle rate + 20 ms. None: not within the tail."""
    after = [s for s in samples if s[0] >= t_last]
    for i, s in enumerate(after):
        later = next((x for x in after[i:] if x[0] >= s[0] + 1.0), None)
        if later is None:
            return None
        if later[col] - s[col] <= idle_rate * (later[0] - s[0]) + 0.02:
            return round(s[0] - t_last, 2)
    return None


def memory_report(smp: Sampler, idle: tuple[float, float], load: tuple[float, float]) -> dict:
    idle_s, busy = smp.between(*idle), smp.between(*load)

    def mb(col: int, rows: list, agg: object = max) -> float:
        return round(agg([r[col] for r in rows]) / 1024, 1)  # type: ignore[operator]

    out = {
        "server_vmrss_idle_mb": mb(1, idle_s, statistics.median),
        "server_vmrss_peak_mb": mb(1, busy),
        "server_rssanon_idle_mb": mb(2, idle_s, statistics.median),
        "server_rssanon_peak_mb": mb(2, busy),
    }
    out["server_peak_above_idle_mb"] = round(out["server_vmrss_peak_mb"] - out["server_vmrss_idle_mb"], 1)
    if smp.pg is not None:
        out.update(
            pg_vmrss_sum_idle_mb=mb(4, idle_s, statistics.median),
            pg_vmrss_sum_peak_mb=mb(4, busy),
            pg_rssanon_sum_idle_mb=mb(5, idle_s, statistics.median),
            pg_rssanon_sum_peak_mb=mb(5, busy),
        )
        out["pg_rssanon_peak_above_idle_mb"] = round(out["pg_rssanon_sum_peak_mb"] - out["pg_rssanon_sum_idle_mb"], 1)
    return out


def cpu_report(smp: Sampler, idle: tuple[float, float], t_last: float, t_end: float) -> dict:
    out: dict = {}
    for name, col in (("server", 3), ("pg", 6), ("pg_client_backends", 7)):
        if name.startswith("pg") and smp.pg is None:
            continue
        a, b = smp.between(*idle)[0], smp.between(*idle)[-1]
        rate = (b[col] - a[col]) / max(1e-9, b[0] - a[0])
        tail = smp.between(t_last, t_end)
        out[f"{name}_idle_cpu_per_s"] = round(rate, 3)
        out[f"{name}_cpu_stop_after_last_response_s"] = cpu_stop_delay(smp.samples, col, t_last, rate)
        out[f"{name}_cpu_in_tail_above_idle_s"] = round(
            tail[-1][col] - tail[0][col] - rate * (tail[-1][0] - tail[0][0]), 2
        )
        # CPU seconds used since the last response, every ~0.1 s over 3 s: where the work stopped
        out[f"{name}_cpu_after_last_response"] = [
            (round(x[0] - t_last, 2), round(x[col] - tail[0][col], 2)) for x in tail[::2] if x[0] - t_last <= 3
        ]
    if smp.pg is not None:  # autovacuum, checkpointer... are not the requests' work: named apart
        out["pg_cpu_after_last_response_by_process"] = smp.tail_by_process(t_last)
    return out


def request_report(events: list, t0: float, deadline: float) -> dict:
    ms = [(b - a) * 1000 for a, b, _ in events]
    outcomes = Counter(str(o) for _, _, o in events)
    late = [round((b - a), 2) for a, b, _ in events if b - a > deadline + 1]
    bad = {k: v for k, v in outcomes.items() if k not in ("200", "429", "504")}
    return {
        "requests": len(events),
        "outcomes": dict(outcomes.most_common()),
        "not_answer_504_or_429": sum(bad.values()),
        "max_request_s": round(max(ms) / 1000, 2) if ms else None,
        "p50_request_s": round(pct(ms, 50) / 1000, 2) if ms else None,
        "p99_request_s": round(pct(ms, 99) / 1000, 2) if ms else None,
        "over_deadline_plus_1s": len(late),
        "late_examples_s": sorted(late)[-5:],
    }


def run_backend(backend: str, args: argparse.Namespace, pg: Postgres | None) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"hybridmem-worst-{backend}-") as tmp:
        db = str(Path(tmp) / "worst.db") if pg is None else pg.new_database()
        env = {"HYBRIDMEM_SERVER_REQUEST_TIMEOUT": str(args.deadline)}
        serve = Serve(db, Path(tmp) / "server.log", f"{KEY}:{NS}", NS, env=env)
        smp = Sampler(serve.pid, pg)
        try:
            serve.wait_ready()
            smp.start()
            start_mb = round(proc_rss_kb(serve.pid) / 1024, 1)
            fill_s = fill(serve.url, args.docs)
            q = {"search_text": "pool timeout replica", "top_k": 10, "metadata_filter": {"environment": "dev"}}
            httpx.post(serve.url + "/v1/query", json=q, headers={"X-API-Key": KEY}, timeout=60).raise_for_status()
            time.sleep(2)  # idle: after the fill and one ordinary query (indexes loaded)
            idle = (time.monotonic(), time.monotonic() + 3)
            time.sleep(3)
            print(f"[{backend}] filled {args.docs} docs in {fill_s} s; worst-case load", file=sys.stderr, flush=True)
            load_start = time.monotonic()
            events, examples = asyncio.run(
                worst_load(serve.url, args.clients, args.seconds, args.deadline, args.in_values, args.seed)
            )
            t_last = max(b for _, b, _ in events)
            time.sleep(args.tail)
            t_end = time.monotonic()
            alive = serve.alive()
        finally:
            smp.halt.set()
            serve.stop()
            log = serve.log_path.read_text(errors="replace")
    result = {"backend": backend, "fill_s": fill_s, "server_vmrss_at_start_mb": start_mb}
    result.update(request_report(events, load_start, args.deadline))
    result["unexpected_examples"] = examples
    result.update(memory_report(smp, idle, (load_start, t_end)))
    result.update(cpu_report(smp, idle, t_last, t_end))
    result["server_alive_at_end"] = alive
    result["server_log_tracebacks"] = log.count("Traceback (most recent call last)")
    result["server_log_first_error"] = next((ln for ln in log.splitlines() if " ERROR " in ln), None)
    return result


def verdict(r: dict, deadline: float) -> list[str]:
    """The targets a backend's run missed."""
    missed = []
    if r["not_answer_504_or_429"]:
        missed.append(f"{r['not_answer_504_or_429']} requests got another status: {r['outcomes']}")
    if r["over_deadline_plus_1s"]:
        missed.append(
            f"{r['over_deadline_plus_1s']} requests took over {deadline + 1:g} s (max {r['max_request_s']} s)"
        )
    if r["server_peak_above_idle_mb"] > RSS_TARGET_MB:
        missed.append(f"server RSS peak {r['server_peak_above_idle_mb']} MB above idle")
    if r.get("pg_rssanon_peak_above_idle_mb", 0) > RSS_TARGET_MB:
        missed.append(f"PostgreSQL RssAnon peak {r['pg_rssanon_peak_above_idle_mb']} MB above idle")
    for who in ("server", "pg_client_backends"):  # the requests' work (all of PostgreSQL is reported too)
        stop = r.get(f"{who}_cpu_stop_after_last_response_s", 0.0)
        if stop is None or stop > 1.0:
            missed.append(f"{who} CPU still rising {stop} s after the last response (None: all through the tail)")
    if not r["server_alive_at_end"]:
        missed.append("the server died")
    return missed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    ap.add_argument("--docs", type=int, default=5000)
    ap.add_argument("--seconds", type=float, default=30.0, help="of worst-case load per backend")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--deadline", type=float, default=2.0, help="the server's request_timeout (s)")
    ap.add_argument("--in-values", type=int, default=hm_filters.MAX_IN_VALUES, help="values per $in list")
    ap.add_argument("--tail", type=float, default=5.0, help="seconds sampled after the last response")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--out", type=Path, help="default bench/results/worst-case/<date>[-in<N>].json")
    args = ap.parse_args()
    today = dt.date.today().isoformat()
    suffix = "" if args.in_values == hm_filters.MAX_IN_VALUES else f"-in{args.in_values}"
    out = args.out or ROOT / "bench" / "results" / "worst-case" / f"{today}{suffix}.json"
    info = {k: v for k, v in vars(args).items() if k != "out"}
    meta = limit_metadata(0)
    info.update(metadata_keys=len(meta), metadata_json_bytes=len(json.dumps(meta, ensure_ascii=False)))
    flt = worst_filter(random.Random(0), args.in_values)
    info.update(filter_conditions=hm_filters.MAX_CONDITIONS, filter_json_bytes=len(json.dumps(flt)))
    info.update(date=today, python=platform.python_version(), cpus=os.cpu_count(), **code_info())
    info["load_avg_before"] = [round(x, 2) for x in os.getloadavg()]
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    results, missed = [], {}
    for backend in backends:
        pg = Postgres() if backend == "postgres" else None
        try:
            results.append(run_backend(backend, args, pg))
        finally:
            if pg is not None:
                pg.stop()
        missed[backend] = verdict(results[-1], args.deadline)
        print(json.dumps(results[-1], indent=2), file=sys.stderr)
    result = {**info, "backends": results, "missed": missed, "load_avg_after": [round(x, 2) for x in os.getloadavg()]}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    for r in results:
        pg = (
            f"; PostgreSQL RssAnon +{r['pg_rssanon_peak_above_idle_mb']} MB"
            if "pg_rssanon_peak_above_idle_mb" in r
            else ""
        )
        print(
            f"[{r['backend']}] {r['requests']} requests {r['outcomes']}; max {r['max_request_s']} s (deadline "
            f"{args.deadline:g} s); server RSS idle {r['server_vmrss_idle_mb']} MB, peak {r['server_vmrss_peak_mb']} MB"
            f"{pg}; CPU stopped {r['server_cpu_stop_after_last_response_s']} s after the last response; "
            f"missed: {missed[r['backend']] or 'nothing'}",
            file=sys.stderr,
        )
    print(f"written to {out}", file=sys.stderr)
    if any(missed.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
