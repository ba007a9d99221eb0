"""bench/results/scaling.png from the measured results of both backends (no run of its own).

    python -m bench scaling_chart

Three panels against the number of chunks, log-log: hybrid query p50, writes per second, the
query process's RSS. Series, each from its results file (a missing file or point is left out,
never invented):

- embedded, 2026-11: ``bench/scaling.py`` (``scaling.json``, 10k-1M; the graph rebuilt by every
  process, the BM25 leg in numpy);
- embedded, now: fresh processes on the saved, memory-mapped indexes (``bench/cold_start.py``):
  1M ``cold-start-1m-2026-12-06.json`` (else ``cold-start-floor.json``), 10M
  ``cold-start-10m-positions.json``;
- PostgreSQL: ``bench/pg_scaling.py`` with the BM25 leg in SQL (``pg_scaling_100k.json``,
  ``pg_scaling_1m.json``) and in process (``pg_scaling_1m_bm25_process.json``); its RSS is the
  benchmark client's (the server's memory is PostgreSQL's own).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def _load(name: str) -> Any:
    p = RESULTS / name
    return json.loads(p.read_text()) if p.exists() else None


def series() -> dict[str, dict[str, list[tuple[int, float]]]]:
    """{panel: {label: [(chunks, value)]}} from the results files."""
    out: dict[str, dict[str, list[tuple[int, float]]]] = {"p50": {}, "writes": {}, "rss": {}}

    def add(panel: str, label: str, n: int, v: float | None) -> None:
        if v is not None:
            out[panel].setdefault(label, []).append((n, float(v)))

    old = _load("scaling.json")
    for s in old["sizes"] if old else []:
        lab = "embedded, 2026-11 (graph rebuilt per process)"
        add("p50", lab, s["n"], s["query"]["latency"]["hybrid"]["p50_ms"])
        add("writes", lab, s["n"], s["build"]["write"]["chunks_per_s"])
        add("rss", lab, s["n"], s["query"]["rss_mb_after_queries"])

    now = "embedded, now (mapped indexes, fresh process)"
    bm25_now = "embedded, now: BM25 leg alone"
    floor = _load("cold-start-1m-2026-12-06.json") or _load("cold-start-floor.json")
    if floor:
        runs = floor["runs"]["mapped"]
        add("p50", now, floor["n"], statistics.median(r["p50_ms"] for r in runs))
        add("p50", bm25_now, floor["n"], statistics.median(r["bm25_p50_ms"] for r in runs))
        add("writes", now, floor["n"], floor["write_chunks_per_s"])
        add("rss", now, floor["n"], statistics.median(r["mem_after"]["VmRSS"] for r in runs))
    big = _load("cold-start-10m-positions.json")  # the code as shipped: the bounds saved, no readahead
    if big:
        runs = big["with_bounds"]["after"]
        add("p50", now, big["n"], statistics.median(r["p50_ms"] for r in runs))
        add("p50", bm25_now, big["n"], statistics.median(r["bm25_p50_ms"] for r in runs))
        add("rss", now, big["n"], statistics.median(r["mem_after"]["VmRSS"] for r in runs))
    ten = _load("cold-start-10m.json")
    if ten and "rebuild_2026_12_06" in ten:
        add("writes", now, ten["n"], ten["rebuild_2026_12_06"]["write_chunks_per_s"])

    for name in ("pg_scaling_100k.json", "pg_scaling_1m.json", "pg_scaling_1m_bm25_process.json"):
        d = _load(name)
        for r in d["results"] if d else []:
            if r["backend"] != "postgres":
                continue
            lab = "PostgreSQL, BM25 in process" if r.get("bm25_leg") == "process" else "PostgreSQL, BM25 in SQL"
            add("p50", lab, r["n"], r["query"]["hybrid"]["p50_ms"])
            add("writes", lab, r["n"], r["ingest"]["chunks_per_s"])
            add("rss", lab, r["n"], r["client_rss_mb"]["end"])
    for panel in out.values():
        for pts in panel.values():
            pts.sort()
    return out


STYLE = {
    "embedded, 2026-11 (graph rebuilt per process)": dict(color="#999999", marker="o", linestyle="--"),
    "embedded, now (mapped indexes, fresh process)": dict(color="#d62728", marker="o", linestyle="-"),
    "embedded, now: BM25 leg alone": dict(color="#1f77b4", marker="s", linestyle=":"),
    "PostgreSQL, BM25 in SQL": dict(color="#8c564b", marker="^", linestyle="--"),
    "PostgreSQL, BM25 in process": dict(color="#2ca02c", marker="^", linestyle="-"),
}


def draw(data: dict[str, dict[str, list[tuple[int, float]]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    titles = {
        "p50": "hybrid query p50 (ms; the BM25 leg alone dotted)",
        "writes": "writes (chunks per second)",
        "rss": "query process RSS after the queries (MB)",
    }
    fig, axes = plt.subplots(1, 3, figsize=(18, 6.2))
    for ax, (panel, title) in zip(axes, titles.items()):
        for label, pts in data[panel].items():
            xs, ys = zip(*pts)
            ax.plot(xs, ys, label=label, **STYLE.get(label, {}))
            for x, y in pts:
                ax.annotate(
                    f"{y:,.3g}" if y < 100 else f"{y:,.0f}",
                    (x, y),
                    textcoords="offset points",
                    xytext=(4, 4),
                    fontsize=8,
                )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("chunks")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    if "p50" in data:
        axes[0].axhline(15, color="#d62728", alpha=0.25, linewidth=1)
        axes[0].annotate(
            "10M target 15 ms", (1e4, 15), fontsize=8, color="#d62728", xytext=(0, 3), textcoords="offset points"
        )
    handles: dict[str, Any] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=3, fontsize=9, frameon=False)
    fig.suptitle("hybridmem scaling, both backends (synthetic incident notes, look-up vectors, 2 cores)")
    fig.tight_layout(rect=(0, 0.1, 1, 0.95))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=RESULTS / "scaling.png")
    a = ap.parse_args()
    data = series()
    for panel, by in data.items():
        for label, pts in by.items():
            print(f"{panel:7} {label}: " + ", ".join(f"{n:,}: {v:,.4g}" for n, v in pts))
    draw(data, a.out)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
