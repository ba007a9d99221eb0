"""The evaluation report: results.json, report.md and the PNG charts written from a results dict."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from hybridmem.eval.report import render_markdown, render_summary, write_report, write_summary_chart  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
KS = [1, 2, 3, 5, 10, 20, 50, 100]


def _metrics(mrr: float, ndcg: float, recalls: tuple[float, float, float, float], n: int) -> dict:
    r1, r5, r10, r100 = recalls
    return {
        "mrr@10": mrr,
        "ndcg@10": ndcg,
        "recall@1": r1,
        "recall@5": r5,
        "recall@10": r10,
        "recall@100": r100,
        "queries": n,
    }


def _mode(all_, ident, para, curve, p50, p95) -> dict:
    return {
        "status": "ok",
        "queries": 21,
        "metrics": {
            "all": _metrics(*all_, 21),
            "exact_identifier": _metrics(*ident, 12),
            "paraphrase": _metrics(*para, 9),
        },
        "recall_curve": {"k": KS, "recall": curve},
        "latency_ms": {"p50": p50, "p95": p95, "mean": (p50 + p95) / 2},
    }


def make_results() -> dict:
    return {
        "dataset": {
            "name": "memqa",
            "path": "shared/data/memqa",
            "split": "test",
            "docs": 412,
            "chunks": 530,
            "queries": 21,
            "categories": {"exact_identifier": 12, "paraphrase": 9},
        },
        "embedder": "e5:multilingual-e5-small-q4",
        "top_k": 10,
        "depth": 100,
        "index": {"cached": False, "build_s": 812.3, "embed_s": 790.1, "key": "ab12cd34ef56ab78"},
        "modes": {
            "bm25": _mode(
                (0.612, 0.655, (0.52, 0.74, 0.80, 0.93)),
                (0.901, 0.912, (0.83, 0.95, 0.97, 1.0)),
                (0.227, 0.313, (0.11, 0.44, 0.56, 0.83)),
                [0.52, 0.60, 0.66, 0.74, 0.80, 0.86, 0.90, 0.93],
                3.1,
                5.0,
            ),
            "vector": _mode(
                (0.588, 0.641, (0.47, 0.72, 0.81, 0.96)),
                (0.655, 0.690, (0.58, 0.78, 0.84, 0.97)),
                (0.498, 0.576, (0.33, 0.67, 0.78, 0.94)),
                [0.47, 0.58, 0.65, 0.72, 0.81, 0.88, 0.93, 0.96],
                12.4,
                19.8,
            ),
            "hybrid": _mode(
                (0.701, 0.744, (0.61, 0.83, 0.88, 0.98)),
                (0.893, 0.905, (0.83, 0.94, 0.97, 1.0)),
                (0.446, 0.529, (0.33, 0.67, 0.78, 0.96)),
                [0.61, 0.70, 0.76, 0.83, 0.88, 0.92, 0.96, 0.98],
                15.9,
                24.2,
            ),
            "rerank": {"status": "skipped", "note": "no LLM configured (set HYBRIDMEM_LLM)"},
        },
        "comparisons": [
            {
                "a": "hybrid",
                "b": "bm25",
                "metric": "ndcg@10",
                "mean_diff": 0.089,
                "ci95": [0.031, 0.148],
                "p_bootstrap": 0.004,
                "p_randomization": 0.006,
                "queries": 21,
                "label": "hybrid vs best single leg (bm25)",
            },
            {
                "a": "vector",
                "b": "bm25",
                "metric": "ndcg@10",
                "mean_diff": -0.014,
                "ci95": [-0.09, 0.06],
                "p_bootstrap": 0.71,
                "p_randomization": 0.74,
                "queries": 21,
            },
        ],
        "references": [
            {"system": "BM25 flat (Pyserini)", "metric": "ndcg@10", "value": 0.679, "source": "shared/data/README.md"}
        ],
        "targets": [
            {"mode": "hybrid", "metric": "ndcg@10", "target": 0.70, "measured": 0.744, "met": True, "gap": 0.044},
            {
                "mode": "hybrid",
                "metric": "mrr@10",
                "target": 0.75,
                "measured": 0.701,
                "met": False,
                "gap": -0.049,
                "why": "paraphrase queries pull the mean down",
            },
        ],
        "sweep": {
            "metric": "ndcg@10",
            "tune_split": "train",
            "report_split": "test",
            "params": ["dense_weight", "rrf_k"],
            "grid": [
                {
                    "params": {"dense_weight": 1, "rrf_k": 60},
                    "tune": {"all": 0.731, "exact_identifier": 0.90, "paraphrase": 0.51},
                    "report": {"all": 0.744, "exact_identifier": 0.905, "paraphrase": 0.529},
                },
                {
                    "params": {"dense_weight": 1.5, "rrf_k": 60},
                    "tune": {"all": 0.738, "exact_identifier": 0.88, "paraphrase": 0.55},
                    "report": {"all": 0.741, "exact_identifier": 0.884, "paraphrase": 0.551},
                },
                {
                    "params": {"dense_weight": 0.5, "rrf_k": 20},
                    "tune": {"all": 0.722, "exact_identifier": 0.92, "paraphrase": 0.46},
                    "report": {"all": 0.730, "exact_identifier": 0.917, "paraphrase": 0.481},
                },
            ],
            "baseline": {
                "params": {"dense_weight": 1, "rrf_k": 60},
                "tune": {"all": 0.731, "exact_identifier": 0.90, "paraphrase": 0.51},
                "report": {"all": 0.744, "exact_identifier": 0.905, "paraphrase": 0.529},
            },
            "recommended": None,
            "verdict": "classic RRF stays: no setting beats it in every category",
        },
        "notes": ["3 queries without judged documents were dropped", "index built on 2 CPU cores"],
        "started": "2026-11-29T17:00:00Z",
        "took_s": 42.0,
        "hybridmem_version": "0.1.0",
    }


def make_single_category() -> dict:
    r = make_results()
    r["dataset"].update(name="scifact", categories={"all": 300}, queries=300)
    for mode in r["modes"].values():
        if "metrics" in mode:
            mode["metrics"] = {"all": mode["metrics"]["all"]}
    r["index"] = {"cached": True, "key": "ab12cd34ef56ab78"}
    for key in ("sweep", "targets", "notes"):
        del r[key]
    return r


def _check_png(path: Path) -> None:
    import matplotlib.image as mpimg

    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert len(data) > 10_000
    img = mpimg.imread(path)
    assert img.ndim == 3 and img.shape[0] >= 300 and img.shape[1] >= 500


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> tuple[dict, dict[str, Path]]:
    results = make_results()
    out = tmp_path_factory.mktemp("report") / "nested" / "out"  # created when missing
    return results, write_report(results, out)


def test_writes_every_file(written) -> None:
    _, paths = written
    assert set(paths) == {"json", "markdown", "metric_by_category", "recall_curve"}
    assert paths["json"].name == "results.json" and paths["markdown"].name == "report.md"
    for key in ("metric_by_category", "recall_curve"):
        assert paths[key].name == f"{key}.png"
        _check_png(paths[key])


def test_json_round_trips(written) -> None:
    results, paths = written
    text = paths["json"].read_text(encoding="utf-8")
    assert json.loads(text) == results
    assert "\n  " in text  # indented
    assert "✅" not in text and "—" not in json.dumps(results)  # nothing injected


def test_json_keeps_unicode(tmp_path: Path) -> None:
    results = make_single_category()
    results["notes"] = ["requête café — ok"]
    paths = write_report(results, tmp_path)
    assert "requête café — ok" in paths["json"].read_text(encoding="utf-8")


def test_markdown_contents(written) -> None:
    _, paths = written
    md = paths["markdown"].read_text(encoding="utf-8")
    assert md.startswith("# hybridmem evaluation — memqa (test)\n")
    assert "e5:multilingual-e5-small-q4" in md and "13 min 32 s" in md
    # overall table: hybrid has the best nDCG@10, bm25 the lowest latency
    hybrid_row = next(line for line in md.splitlines() if line.startswith("| `hybrid` |"))
    assert "**0.744**" in hybrid_row and "**0.701**" in hybrid_row
    bm25_row = next(line for line in md.splitlines() if line.startswith("| `bm25` |"))
    assert "**3.1**" in bm25_row and "| 0.655 |" in bm25_row
    # the skipped mode with its note, and not in the table
    assert "- `rerank` — skipped: no LLM configured (set HYBRIDMEM_LLM)" in md
    assert "| `rerank` |" not in md
    # per-category tables, one row per category (+ all) with query counts
    assert "### MRR@10 per category" in md and "### nDCG@10 per category" in md
    assert "| exact_identifier | 12 | **0.901** | 0.655 | 0.893 |" in md
    assert "| paraphrase | 9 | 0.313 | **0.576** | 0.529 |" in md
    assert "| **all** | 21 | 0.655 | 0.641 | **0.744** |" in md
    # comparisons with plain-words verdicts
    assert "hybrid vs best single leg (bm25)" in md
    assert "[+0.031, +0.148]" in md
    assert "significant at 0.05: `hybrid` is better" in md
    assert "not significant: could be noise" in md
    # references: ours vs published
    assert "| BM25 flat (Pyserini) | ndcg@10 | 0.679 | 0.655 | 0.641 | 0.744 |" in md
    # targets
    assert "✅" in md and "❌" in md
    missed = next(line for line in md.splitlines() if "❌" in line)
    assert "-0.049" in missed and "paraphrase queries pull the mean down" in missed
    # sweep: grid with tune and report values, baseline marked, verdict stated
    assert "## Parameter sweep" in md and "train: paraphrase" in md and "test: exact_identifier" in md
    baseline_row = next(line for line in md.splitlines() if "**baseline**" in line)
    assert "**0.744**" in baseline_row
    assert "| 1.5 | 60 | 0.738 |" in md
    assert "**Verdict:** classic RRF stays: no setting beats it in every category" in md
    assert "**Recommended:** none — keep the baseline (dense_weight=1, rrf_k=60)." in md
    # notes and charts
    assert "- 3 queries without judged documents were dropped" in md
    assert "](metric_by_category.png)" in md and "](recall_curve.png)" in md
    # section order
    order = [
        "## Overall",
        "## By category",
        "## Paired comparisons",
        "## Published references",
        "## Targets",
        "## Parameter sweep",
        "## Notes",
        "## Charts",
    ]
    positions = [md.index(h) for h in order]
    assert positions == sorted(positions)


def test_recommended_setting_is_stated() -> None:
    results = make_results()
    grid = results["sweep"]["grid"]
    results["sweep"].update(recommended=grid[1], verdict="dense_weight 1.5 helps paraphrases")
    md = render_markdown(results)
    assert "⭐ recommended" in md
    assert "**Recommended:** dense_weight=1.5, rrf_k=60 — test nDCG@10 (all) 0.741 vs baseline 0.744 (-0.003)" in md


def test_single_category_has_no_category_tables(tmp_path: Path) -> None:
    results = make_single_category()
    paths = write_report(results, tmp_path)
    md = paths["markdown"].read_text(encoding="utf-8")
    assert "## By category" not in md and "per category" not in md
    assert "index from cache (key `ab12cd34ef56…`)" in md
    assert "## Parameter sweep" not in md and "## Targets" not in md and "## Notes" not in md
    assert "| `hybrid` |" in md
    _check_png(paths["metric_by_category"])


def test_missing_optional_parts_render() -> None:
    results = make_single_category()
    for key in ("comparisons", "references", "index", "top_k", "depth", "started", "took_s", "embedder"):
        results.pop(key, None)
    del results["modes"]["vector"]["latency_ms"]
    results["modes"]["graph"] = {"status": "error"}
    md = render_markdown(results)
    assert "- `graph` — error" in md
    assert "## Paired comparisons" not in md and "## Published references" not in md
    assert md.count("| `") == 3  # three ok modes in the overall table


def test_harness_field_variants() -> None:
    """Spellings the harness uses: index_s, notes that already say "skipped:", labelled targets, languages."""
    results = make_results()
    results["index"] = {"cached": False, "key": "k", "index_s": 95.0, "embed_s": 61.5}
    results["modes"]["rerank"]["note"] = "skipped: reranking needs an LLM and none is configured"
    results["targets"].append(
        {
            "mode": "hybrid",
            "metric": "ndcg@10",
            "target": 0.655,
            "measured": 0.744,
            "met": True,
            "gap": 0.089,
            "label": "hybrid ≥ best single leg (bm25)",
        }
    )
    results["sweep"].update(tune_split="dev half", report_split="other half", tune_queries=10, report_queries=11)
    results["by_language"] = {
        m: {
            "all": {"ndcg@10": v, "queries": 21},
            "fr": {"ndcg@10": v - 0.1, "queries": 11},
            "de": {"ndcg@10": v + 0.1, "queries": 10},
        }
        for m, v in (("bm25", 0.655), ("vector", 0.641), ("hybrid", 0.744))
    }
    md = render_markdown(results)
    assert "index built in 1 min 35 s (embedding 1 min 02 s)" in md
    assert "- `rerank` — skipped: reranking needs an LLM and none is configured\n" in md
    assert "| hybrid ≥ best single leg (bm25) | `hybrid` | ndcg@10 | 0.655 | 0.744 | ✅ | +0.089 |" in md
    assert "`dev half` split and reported on the `other half` split (10 and 11 queries)" in md
    assert "## nDCG@10 per language" in md and "| de | 10 | 0.755 | 0.741 | **0.844** |" in md


def test_wide_sweep_splits_into_two_tables() -> None:
    results = make_results()
    for g in [*results["sweep"]["grid"], results["sweep"]["baseline"]]:
        for part in ("tune", "report"):
            g[part].update(temporal=0.4, negation=0.3)
    md = render_markdown(results)
    assert "### Tuned on `train`" in md and "### Reported on `test`" in md
    assert "train: all" not in md
    assert "| | dense_weight | rrf_k | all | exact_identifier | paraphrase | temporal | negation |" in md.replace(
        "|  |", "| |"
    )


def test_no_ok_mode_still_writes_charts(tmp_path: Path) -> None:
    results = {"dataset": {"name": "empty"}, "modes": {"bm25": {"status": "error", "note": "boom"}}}
    paths = write_report(results, tmp_path)
    assert "No mode ran successfully" in paths["markdown"].read_text(encoding="utf-8")
    for key in ("metric_by_category", "recall_curve"):
        assert paths[key].read_bytes()[:8] == PNG_MAGIC


def test_summary_compares_datasets(tmp_path: Path) -> None:
    a = make_results()
    b = make_single_category()
    b["modes"]["vector"]["metrics"]["all"]["ndcg@10"] = 0.702
    b["comparisons"] = [
        dict(
            a["comparisons"][0],
            b="vector",
            mean_diff=0.012,
            p_randomization=0.31,
            label="hybrid vs best single leg (vector)",
        )
    ]
    runs = [a, b]
    before = copy.deepcopy(runs)
    md = render_summary(runs)
    assert runs == before
    assert "memqa (test)" in md and "scifact (test)" in md
    lines = md.splitlines()
    header = next(line for line in lines if line.startswith("| dataset"))
    assert "`bm25`" in header and "`vector`" in header and "`hybrid`" in header and "`rerank`" not in header
    memqa = next(line for line in lines if line.startswith("| memqa"))
    assert "`bm25` 0.655" in memqa and "**+0.089**" in memqa and "0.006" in memqa
    assert "BM25 flat (Pyserini) 0.679" in memqa
    scifact = next(line for line in lines if line.startswith("| scifact"))
    assert "`vector` 0.702" in scifact and "| +0.012 |" in scifact and "0.310" in scifact

    path = write_summary_chart(runs, tmp_path / "charts" / "summary.png")
    assert path.exists()
    _check_png(path)


def test_import_is_light() -> None:
    import subprocess
    import sys

    code = (
        "import sys, hybridmem, hybridmem.eval.report; "
        "assert 'matplotlib' not in sys.modules, 'matplotlib imported eagerly'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
