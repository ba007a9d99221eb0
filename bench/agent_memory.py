"""Speed of agent memory (docs/agent-memory.md), ratios against a baseline taken in the same run:

    python -m bench agent_memory                 # 100k messages in 1,000 sessions (the reference run)
    python -m bench agent_memory --n 20000       # quicker

* ``add_messages`` throughput until BM25-searchable (``auto_embed=False``: the vectors come later
  from the background worker, as in production), in messages per second (target >= 2,000).
* Query p50 of hybrid with a ``session_id`` scope and with a ``time_range``, against the same
  queries unfiltered (target <= 1.5x), and of ``as_of`` against a plain query (target <= 2x), after
  10% of the memories were updated with history kept. Repeated filters are what agents send, so
  each query shape runs once cold (reported) and then warm.

The fast ``hash`` embedder stands in for the model: this measures the memory, not the embedder
(e5 costs ~3 ms per query on top, the same for every shape). SQLite store in a temp dir.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from hybridmem import Memory  # noqa: E402

WORDS = [f"w{i}" for i in range(5000)] + ["billing", "pool", "deploy", "HEL-4040", "max_connections", "outage"]


def _messages(rng: random.Random, n: int, start: float) -> list[dict]:
    return [
        {
            "role": rng.choice(["user", "assistant"]),
            "name": rng.choice(["Ana", "Bo", "Cy"]),
            "content": " ".join(rng.choices(WORDS, k=rng.randint(8, 30))),
            "timestamp": start + i * 60.0,
        }
        for i in range(n)
    ]


def _p50(m: Memory, queries: list[str], **kw) -> tuple[float, float]:
    """(cold ms of the first query, warm p50 ms over the rest)."""
    t = time.perf_counter()
    m.search(queries[0], **kw)
    cold = (time.perf_counter() - t) * 1000
    lat = []
    for q in queries[1:]:
        t = time.perf_counter()
        m.search(q, **kw)
        lat.append((time.perf_counter() - t) * 1000)
    return round(cold, 2), round(statistics.median(lat), 3)


def run(n: int, sessions: int, seed: int) -> dict:
    rng = random.Random(seed)
    out: dict = {"messages": n, "sessions": sessions}
    with tempfile.TemporaryDirectory() as d, Memory(Path(d) / "m.db", embedder="hash", auto_embed=False) as m:
        per = n // sessions
        t = time.perf_counter()
        for s in range(sessions):
            m.add_messages(_messages(rng, per, 1.68e9 + s * 86400.0), session_id=f"s{s}", user_id=f"u{s % 50}")
        took = time.perf_counter() - t
        out["add_messages_per_s"] = round(per * sessions / took, 1)
        m.embed_pending()
        qs = [" ".join(rng.choices(WORDS, k=4)) for _ in range(101)]
        base = _p50(m, qs, mode="hybrid")
        sess = _p50(m, qs, mode="hybrid", session_id="s7")
        span = {"from": 1.68e9 + 10 * 86400.0, "to": 1.68e9 + 20 * 86400.0}
        rng_t = _p50(m, qs, mode="hybrid", time_range=span)
        # 10% of the memories updated, history kept
        ids = [f"s{s}:{t}" for s in range(sessions) for t in range(0, per, 10)]
        t_mid = time.time()
        time.sleep(0.01)
        for i in ids:
            m.update(i, "corrected " + " ".join(rng.choices(WORDS, k=12)))
        m.embed_pending()
        plain = _p50(m, qs, mode="hybrid")
        as_of = _p50(m, qs, mode="hybrid", as_of=t_mid)
        out["query_ms"] = {
            "unfiltered": base,
            "session_id": sess,
            "time_range": rng_t,
            "after_updates_plain": plain,
            "as_of": as_of,
        }
        out["ratios_warm_p50"] = {
            "session_id/unfiltered": round(sess[1] / base[1], 2),
            "time_range/unfiltered": round(rng_t[1] / base[1], 2),
            "as_of/plain": round(as_of[1] / plain[1], 2),
        }
        out["updated"] = len(ids)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "agent-memory.json")
    a = ap.parse_args()
    res = run(a.n, a.sessions, a.seed)
    print(json.dumps(res, indent=2))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
