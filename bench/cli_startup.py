"""Start-up time of the ``hybridmem`` command, as a user feels it: each command a fresh process.

    python -m bench cli_startup [--runs 7] [--server] [--embedder hash] [--json OUT]
    python -m bench cli_startup --src /tmp/old/src     # another checkout's code (before/after)

Measured (wall time of the whole process, best and median of ``--runs``):

- ``hybridmem --help``                      (target ≤ 0.3 s on an idle machine)
- ``hybridmem search --help``
- ``hybridmem search TEXT --mode bm25``      on a small temporary store (target ≤ 0.5 s)
- ``hybridmem search TEXT`` (hybrid), ``--local``: the query model loads in the process
- with ``--server``: the same hybrid search while a ``hybridmem serve`` of the store runs (the
  server embeds the query; the CLI loads no model), and its ``--local`` twin for comparison

The store (40 short documents, one namespace) is built with the ``hash`` embedder unless
``--embedder`` says otherwise (``--embedder e5`` shows what a real model load costs a local
hybrid search). The machine may be busy: the best run is the one to compare with a target.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TARGETS = {"--help": 0.3, "search bm25": 0.5}


#: ``--src``: run the command from this source folder (PYTHONPATH) instead of the installed package
SRC: Path | None = None


def _command() -> list[str]:
    """The installed ``hybridmem`` script (what a user runs), else ``python -m hybridmem.cli``."""
    exe = shutil.which("hybridmem")
    return [exe] if exe and SRC is None else [sys.executable, "-m", "hybridmem.cli"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HYBRIDMEM_")}
    env["TTY_COMPATIBLE"] = "0"  # piped output: the plain format, no progress bars
    if SRC is not None:
        env["PYTHONPATH"] = str(SRC)
    return env


def _time(args: list[str], runs: int) -> dict[str, float]:
    """Best and median wall time of ``runs`` fresh processes running ``args``."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        r = subprocess.run(args, capture_output=True, text=True, env=_env(), timeout=300)
        times.append(time.perf_counter() - t0)
        if r.returncode != 0:
            raise SystemExit(f"{' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")
    return {"best_s": round(min(times), 3), "median_s": round(statistics.median(times), 3), "runs": runs}


def _build_store(db: Path, embedder: str) -> None:
    from hybridmem import Memory

    with Memory(db, embedder=embedder, auto_embed=False) as mem:
        for i in range(40):
            mem.add(
                f"Incident {i}: PostgreSQL connection pool exhausted on svc-{i % 5}, HTTP 504 at the gateway; "
                f"raise max_connections or fix the leak (HEL-{4000 + i}).",
                id=f"inc-{i}",
                metadata={"service": f"svc-{i % 5}"},
            )
        mem.wait_for_vectors()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_server(cmd: list[str], db: Path, embedder: str) -> subprocess.Popen[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [*cmd, "--db", str(db), "--embedder", embedder, "serve", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    announced = db.with_name(db.name + ".serve.json")
    deadline = time.monotonic() + 120
    while not announced.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit(f"hybridmem serve did not start: {proc.stderr.read() if proc.stderr else ''}")
        time.sleep(0.1)
    # the file is written just before the server binds: wait until it answers
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc
        except OSError:
            if time.monotonic() > deadline:
                proc.kill()
                raise SystemExit("hybridmem serve never answered") from None
            time.sleep(0.1)


def run(runs: int, with_server: bool, embedder: str, local_hybrid: bool = True) -> dict[str, dict[str, float]]:
    cmd = _command()
    results: dict[str, dict[str, float]] = {}
    results["--help"] = _time([*cmd, "--help"], runs)
    results["search --help"] = _time([*cmd, "search", "--help"], runs)
    with tempfile.TemporaryDirectory(prefix="hybridmem-bench-") as tmp:
        db = Path(tmp) / "m.db"
        _build_store(db, embedder)
        base = [*cmd, "--db", str(db)]
        results["search bm25"] = _time([*base, "search", "pool exhausted HEL-4007", "--mode", "bm25"], runs)
        if local_hybrid:
            results["search hybrid, local model"] = _time([*base, "search", "pool exhausted", "--local"], runs)
        if with_server:
            proc = _start_server(cmd, db, embedder)
            try:
                results["search hybrid, via serve"] = _time([*base, "search", "pool exhausted"], runs)
            finally:
                proc.terminate()
                proc.communicate(timeout=30)
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7, help="processes per command (best and median reported)")
    ap.add_argument("--server", action="store_true", help="also time a hybrid search through a running serve")
    ap.add_argument("--embedder", default="hash", help="embedder of the temporary store (hash: no model)")
    ap.add_argument("--json", type=Path, help="also write the numbers to this JSON file")
    ap.add_argument("--src", type=Path, help="time the code of this src/ folder (e.g. an older checkout's)")
    ap.add_argument("--skip-local-hybrid", action="store_true", help="skip the hybrid search with --local")
    args = ap.parse_args()
    global SRC
    SRC = args.src
    results = run(args.runs, args.server, args.embedder, not args.skip_local_hybrid)
    print(f"hybridmem start-up, {args.runs} runs each (embedder {args.embedder}; wall time of the process)")
    print(f"{'command':32} {'best':>8} {'median':>8}  target")
    for name, r in results.items():
        target = TARGETS.get(name)
        verdict = (
            f"≤ {target:.1f} s: {r['best_s'] / target:.2f}× ({'met' if r['best_s'] <= target else 'missed'})"
            if target
            else ""
        )
        print(f"{name:32} {r['best_s']:7.3f}s {r['median_s']:7.3f}s  {verdict}")
    if args.json:
        args.json.write_text(json.dumps({"embedder": args.embedder, "results": results, "targets": TARGETS}, indent=2))


if __name__ == "__main__":
    main()
