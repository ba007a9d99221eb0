"""Load benchmark of the HTTP service: N concurrent clients, 80% queries / 20% writes, for S seconds.

    python -m bench load                                  # 50k chunks, 16 clients, 60 s (the reference run)
    python -m bench load --chunks 2000 --seconds 10       # quick
    python -m bench load --url http://host:8080 --key K   # against a server you run yourself

The store is the synthetic technical corpus of ``bench/_common.py`` (incident notes with identifiers,
metadata environment/service/severity), embedded with the fast ``use`` embedder (this measures the
service, not the model), built once and cached in ``.bench-cache/load/``. The server runs in its own
process (``hybridmem serve``, with an API key) so the load generator does not share its GIL.

Clients are closed-loop (each sends its next request when the previous one answered), run as
asyncio tasks over httpx. Queries: hybrid (30% with a metadata filter, 10% bm25, 10% vector),
top_k 10. Writes: one new memory each, with a unique token. At the end every acknowledged write is
looked up by its token (BM25, top 1) and by id: a write that is not found is a *lost write*.
Reported: throughput, p50/p99 latency (all, queries, writes), per-leg p50 from the responses, error
count by kind, lost writes. Exit status 1 if there were errors or lost writes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]

from bench._common import ENVIRONMENTS, N_SERVICES, make_corpus, make_queries  # noqa: E402

KEY = "bench-load-key-0001"
NS = "bench"


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(p / 100 * len(xs)) - 1))]


def build_store(db: Path, chunks: int, embedder: str) -> dict:
    """The cached store of ``chunks`` synthetic chunks, every vector computed."""
    from hybridmem import Memory

    if db.exists():
        with Memory(db, embedder=embedder, auto_embed=False, namespace=NS) as mem:
            s = mem.stats()
            if s.chunks == chunks and s.pending_vectors == 0:
                return {"cached": True, "build_s": 0.0}
        for suffix in ("", "-wal", "-shm"):
            Path(str(db) + suffix).unlink(missing_ok=True)
    db.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with Memory(db, embedder=embedder, auto_embed=False, namespace=NS, chunk_size=None) as mem:
        docs = make_corpus(chunks)
        for i in range(0, len(docs), 1000):
            mem.add_documents(docs[i : i + 1000])
            print(f"  indexed {min(i + 1000, len(docs))}/{len(docs)}", file=sys.stderr, flush=True)
        t1 = time.perf_counter()
        done = 0
        while mem.store.pending_count() > 0:
            done += mem.embed_pending(limit=2000)
            print(f"  embedded {done}/{chunks}", file=sys.stderr, flush=True)
    return {"cached": False, "index_s": round(t1 - t0, 1), "embed_s": round(time.perf_counter() - t1, 1)}


def start_server(db: Path, embedder: str, port: int, blas_threads: int) -> subprocess.Popen:
    env = {**os.environ, "HYBRIDMEM_API_KEYS": f"{KEY}:{NS}", "HYBRIDMEM_SERVER_REQUEST_TIMEOUT": "60"}
    if blas_threads > 0:  # read by OpenBLAS when numpy loads: the server's every BLAS call uses this many threads
        env["OPENBLAS_NUM_THREADS"] = env["OMP_NUM_THREADS"] = str(blas_threads)
    log = open(db.parent / "server.log", "w")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hybridmem.cli",
            "--db",
            str(db),
            "--embedder",
            embedder,
            "--namespace",
            NS,
            "serve",
            "--port",
            str(port),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


async def wait_ready(url: str, proc: subprocess.Popen | None, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient() as c:
        while True:
            try:
                if (await c.get(url + "/healthz", timeout=2)).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if (proc is not None and proc.poll() is not None) or time.monotonic() > deadline:
                raise SystemExit("the server did not start (see its log)")
            await asyncio.sleep(0.25)


async def run_load(
    url: str, key: str, clients: int, seconds: float, write_ratio: float, seed: int, warm: bool = False
) -> dict:
    queries = make_queries(2000, seed=seed)
    lat: dict[str, list[float]] = defaultdict(list)
    by_kind: dict[str, list[float]] = defaultdict(list)  # query mode (+ filter) or write
    legs: dict[str, list[float]] = defaultdict(list)
    timeline: list[tuple[float, float, str]] = []  # (seconds into the load, ms, kind) of every request
    errors: Counter[str] = Counter()
    acked: dict[str, str] = {}  # id -> unique token
    headers = {"Authorization": f"Bearer {key}"}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60, limits=limits) as c:
        # warm-up (query model loaded, indexes in memory); not measured
        await c.post("/v1/query", json={"search_text": "warm up the pool", "top_k": 10})
        warm_wait = None
        if warm:  # steady state: the HNSW graph the server started building at start-up is ready
            t = time.perf_counter()
            while "building" in str((await c.get("/v1/stats")).json().get("dense_index")):
                if time.perf_counter() - t > 1800:
                    raise SystemExit("the HNSW build did not finish within 30 min")
                await asyncio.sleep(1)
            warm_wait = round(time.perf_counter() - t, 1)
            print(f"HNSW graph ready after {warm_wait} s more", file=sys.stderr)
        index_at_start = (await c.get("/v1/stats")).json().get("dense_index")
        stop_at = time.monotonic() + seconds
        t0 = time.perf_counter()

        async def client(n: int) -> None:
            rng = random.Random(seed * 1000 + n)
            i = 0
            while time.monotonic() < stop_at:
                i += 1
                if rng.random() < write_ratio:
                    doc_id, token = f"load-{n}-{i}", f"lq{n}x{i}z{rng.randrange(10**6)}"
                    text = f"Load note {token}: {rng.choice(queries)} after deploy; {rng.choice(queries)}."
                    body = {
                        "memories": [
                            {
                                "id": doc_id,
                                "text": text,
                                "metadata": {
                                    "environment": rng.choice(ENVIRONMENTS),
                                    "service": f"svc-{rng.randrange(N_SERVICES)}",
                                    "severity": rng.randint(1, 4),
                                },
                            }
                        ]
                    }
                    kind, path, sub = "write", "/v1/memories", "write"
                else:
                    r = rng.random()
                    mode = "bm25" if r < 0.1 else "vector" if r < 0.2 else "hybrid"
                    body = {"search_text": rng.choice(queries), "top_k": 10, "mode": mode}
                    if rng.random() < 0.3:
                        body["metadata_filter"] = {"environment": "production"}
                    kind, path = "query", "/v1/query"
                    sub = mode + (" filtered" if "metadata_filter" in body else "")
                t = time.perf_counter()
                try:
                    resp = await c.post(path, json=body)
                except httpx.HTTPError as e:
                    errors[f"{kind}: {type(e).__name__}"] += 1
                    continue
                ms = (time.perf_counter() - t) * 1000
                if resp.status_code != 200:
                    errors[f"{kind}: HTTP {resp.status_code} {resp.text[:120]}"] += 1
                    continue
                lat[kind].append(ms)
                by_kind[sub].append(ms)
                timeline.append((t - t0, ms, sub))
                if kind == "write":
                    acked[doc_id] = token
                else:
                    for leg, rep in resp.json()["legs"].items():
                        if rep["status"] == "ok":
                            legs[leg].append(rep["took_ms"])
                        elif rep["status"] != "skipped":
                            errors[f"leg {leg}: {rep['status']} {(rep.get('error') or '')[:160]}"] += 1

        await asyncio.gather(*(client(n) for n in range(clients)))
        wall = time.perf_counter() - t0

        # every acknowledged write must be searchable (BM25 by its unique token) and readable by id
        lost: list[str] = []
        sem = asyncio.Semaphore(clients)

        async def verify(doc_id: str, token: str) -> None:
            async with sem:
                r = await c.post("/v1/query", json={"search_text": token, "mode": "bm25", "top_k": 1})
                hits = r.json().get("results", []) if r.status_code == 200 else []
                g = await c.get(f"/v1/memories/{doc_id}")
                if not hits or hits[0]["doc_id"] != doc_id or g.status_code != 200:
                    lost.append(doc_id)

        t1 = time.perf_counter()
        await asyncio.gather(*(verify(d, tok) for d, tok in acked.items()))
        verify_s = time.perf_counter() - t1
        stats = (await c.get("/v1/stats")).json()

    every = lat["query"] + lat["write"]

    def summary(xs: list[float]) -> dict:
        return {
            "n": len(xs),
            "p50_ms": round(pct(xs, 50), 2),
            "p99_ms": round(pct(xs, 99), 2),
            "mean_ms": round(statistics.fmean(xs), 2) if xs else None,
        }

    return {
        "dense_index_at_start": index_at_start,
        "warm_wait_s": warm_wait,
        "wall_s": round(wall, 2),
        "requests": len(every),
        "throughput_rps": round(len(every) / wall, 1),
        "latency": {"all": summary(every), "query": summary(lat["query"]), "write": summary(lat["write"])},
        "latency_by_kind": {k: summary(v) for k, v in sorted(by_kind.items())},
        "legs_p50_ms": {leg: round(pct(xs, 50), 2) for leg, xs in sorted(legs.items())},
        # when the slowest requests started: a burst at 0 s is a cold cache, spread out is steady state
        "slowest": [
            {"at_s": round(a, 2), "ms": round(ms, 1), "kind": k}
            for a, ms, k in sorted(timeline, key=lambda x: -x[1])[:20]
        ],
        "errors": sum(errors.values()),
        "error_kinds": dict(errors.most_common(10)),
        "writes_acknowledged": len(acked),
        "lost_writes": len(lost),
        "lost_examples": lost[:5],
        "verify_s": round(verify_s, 1),
        "store_after": {k: stats.get(k) for k in ("documents", "chunks", "vectors", "pending_vectors", "dense_index")},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunks", type=int, default=50_000, help="store size (default 50000)")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--write-ratio", type=float, default=0.2)
    ap.add_argument("--embedder", default="use")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--workdir", type=Path, default=ROOT / ".bench-cache" / "load")
    ap.add_argument("--url", help="an already running server (skips building and starting one)")
    ap.add_argument("--key", default=KEY, help="API key for --url")
    ap.add_argument("--out", type=Path, help="also write the JSON result here")
    ap.add_argument(
        "--warm",
        action="store_true",
        help="start the load only once the server's background HNSW build has finished "
        "(steady state; default: right after start-up, while it builds)",
    )
    ap.add_argument(
        "--blas-threads",
        type=int,
        default=1,
        help="OPENBLAS_NUM_THREADS of the server process (default 1; 2 reproduces OpenBLAS's per-core "
        "default; 0 leaves the environment alone, and hybridmem serve then sets numpy's BLAS "
        "to 1 thread itself)",
    )
    args = ap.parse_args()

    info = {
        "clients": args.clients,
        "seconds": args.seconds,
        "write_ratio": args.write_ratio,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_avg_before": [round(x, 2) for x in os.getloadavg()],
    }
    proc = None
    if args.url:
        url = args.url.rstrip("/")
        info["target"] = url
    else:
        # a fresh copy of the cached store per run: the writes of one run never pile up in the next
        base = args.workdir / f"{args.embedder.replace(':', '_')}-{args.chunks}.db"
        print(f"store: {args.chunks} chunks, embedder {args.embedder} ({base})", file=sys.stderr)
        info["build"] = build_store(base, args.chunks, args.embedder)
        db = args.workdir / "run" / "load.db"
        shutil.rmtree(db.parent, ignore_errors=True)
        db.parent.mkdir(parents=True)
        shutil.copy(base, db)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        url = f"http://127.0.0.1:{port}"
        info.update(
            chunks=args.chunks,
            embedder=args.embedder,
            target="hybridmem serve (own process)",
            server_blas_threads=args.blas_threads or "default",
        )
        proc = start_server(db, args.embedder, port, args.blas_threads)
    try:
        asyncio.run(wait_ready(url, proc))
        print(
            f"load: {args.clients} clients, {args.write_ratio:.0%} writes, {args.seconds:g} s against {url}",
            file=sys.stderr,
        )
        result = {
            **info,
            **asyncio.run(run_load(url, args.key, args.clients, args.seconds, args.write_ratio, args.seed, args.warm)),
        }
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
    result["load_avg_after"] = [round(x, 2) for x in os.getloadavg()]
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    lat = result["latency"]
    print(
        f"\n{result['requests']} requests in {result['wall_s']} s = {result['throughput_rps']} req/s; "
        f"p50 {lat['all']['p50_ms']} ms, p99 {lat['all']['p99_ms']} ms (queries p50 {lat['query']['p50_ms']} / "
        f"p99 {lat['query']['p99_ms']} ms, writes p50 {lat['write']['p50_ms']} / p99 {lat['write']['p99_ms']} ms); "
        f"errors {result['errors']}, lost writes {result['lost_writes']} of {result['writes_acknowledged']}",
        file=sys.stderr,
    )
    if result["errors"] or result["lost_writes"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
