"""Turn an evaluation results dict into files: ``results.json``, ``report.md`` and PNG charts.

matplotlib is imported lazily (Agg backend) by the chart functions only, so importing this
module — and ``hybridmem`` — stays light; without matplotlib they raise ``ImportError`` with a hint.
"""

from __future__ import annotations

import json
import math
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from ..models import MODES

__all__ = [
    "OVERALL_COLUMNS",
    "plot_metric_by_category",
    "plot_recall_curve",
    "render_markdown",
    "render_summary",
    "write_report",
    "write_summary_chart",
]

INSTALL_HINT = "matplotlib is needed for the evaluation charts: pip install matplotlib"

#: (results key, header, higher is better) for the overall table
OVERALL_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("mrr@10", "MRR@10", True),
    ("ndcg@10", "nDCG@10", True),
    ("recall@1", "R@1", True),
    ("recall@5", "R@5", True),
    ("recall@10", "R@10", True),
    ("recall@100", "R@100", True),
    ("latency:p50", "p50 ms", False),
    ("latency:p95", "p95 ms", False),
)
METRIC_LABELS = {"mrr@10": "MRR@10", "ndcg@10": "nDCG@10"}
ALPHA = 0.05
DPI = 120


# ----------------------------------------------------------------------------- small helpers


def _num(x: Any) -> float | None:
    """``x`` as a finite float, else None (missing, None, NaN, text)."""
    if isinstance(x, bool) or x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _fmt(x: Any, digits: int = 3) -> str:
    v = _num(x)
    return "—" if v is None else f"{v:.{digits}f}"


def _signed(x: Any, digits: int = 3) -> str:
    v = _num(x)
    return "—" if v is None else f"{v:+.{digits}f}"


def _pval(x: Any) -> str:
    v = _num(x)
    if v is None:
        return "—"
    return "< 0.001" if v < 0.001 else f"{v:.3f}"


def _int(x: Any) -> str:
    v = _num(x)
    return "?" if v is None else f"{int(v):,}"


def _cell(x: Any) -> str:
    """Text safe inside a markdown table cell."""
    return str(x).replace("|", "\\|").replace("\n", " ") if x is not None else ""


def _dur(seconds: Any) -> str:
    s = _num(seconds)
    if s is None:
        return "?"
    if s < 60:
        return f"{s:.1f} s"
    m, s = divmod(round(s), 60)
    if m < 60:
        return f"{m} min {s:02d} s"
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min"


def _table(header: Sequence[str], rows: Iterable[Sequence[str]], align: Sequence[str] | None = None) -> str:
    align = align or ["l"] + ["r"] * (len(header) - 1)
    sep = ["---:" if a == "r" else ":---:" if a == "c" else "---" for a in align]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(sep) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _bold_best(values: Sequence[Any], higher: bool = True, digits: int = 3) -> list[str]:
    """Format ``values``; the best one(s), compared as printed, in bold (only when 2+ are numbers)."""
    texts = [_fmt(v, digits) for v in values]
    nums = [float(t) for t in texts if t != "—"]
    if len(nums) < 2:
        return texts
    best = max(nums) if higher else min(nums)
    return [f"**{t}**" if t != "—" and float(t) == best else t for t in texts]


def _modes(results: Mapping[str, Any]) -> Mapping[str, Mapping[str, Any]]:
    m = results.get("modes") or {}
    return m if isinstance(m, Mapping) else {}


def _ok_modes(results: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {k: v for k, v in _modes(results).items() if isinstance(v, Mapping) and v.get("status") == "ok"}


def _metric(mode: Mapping[str, Any], metric: str, category: str = "all") -> Any:
    return ((mode.get("metrics") or {}).get(category) or {}).get(metric)


def _categories(results: Mapping[str, Any]) -> list[str]:
    """Categories with "all" last: the dataset's own list, else whatever the modes report."""
    cats: list[str] = list(((results.get("dataset") or {}).get("categories") or {}).keys())
    for mode in _ok_modes(results).values():
        for c in mode.get("metrics") or {}:
            if c not in cats:
                cats.append(c)
    return [c for c in cats if c != "all"] + ["all"]


def _category_count(results: Mapping[str, Any], category: str) -> Any:
    n = ((results.get("dataset") or {}).get("categories") or {}).get(category)
    if n is None:
        for mode in _ok_modes(results).values():
            n = ((mode.get("metrics") or {}).get(category) or {}).get("queries")
            if n is not None:
                break
    if n is None and category == "all":
        n = (results.get("dataset") or {}).get("queries")
    return n


def _has_categories(results: Mapping[str, Any]) -> bool:
    return len(_categories(results)) > 2  # more than one category besides "all"


def _mode_colors(modes: Iterable[str]) -> dict[str, Any]:
    """The modes of :data:`~hybridmem.models.MODES` get fixed colours, so a mode looks the same in every chart."""
    import matplotlib

    palette = matplotlib.colormaps["tab10"].colors  # type: ignore[attr-defined]  # a ListedColormap, typed Colormap
    out: dict[str, Any] = {}
    extra = len(MODES)
    for m in modes:
        if m in MODES:
            out[m] = palette[MODES.index(m) % len(palette)]
        else:
            out[m] = palette[extra % len(palette)]
            extra += 1
    return out


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(INSTALL_HINT) from e
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _wrap(title: str, fig: Any, fontsize: float) -> str:
    """``title`` broken into lines that fit the figure's width (a long dataset and embedder name
    otherwise runs off both edges)."""
    width = max(30, int(fig.get_figwidth() * 72 / (fontsize * 0.58)))
    return "\n".join(textwrap.wrap(title, width)) or title


def _title(results: Mapping[str, Any]) -> str:
    ds = results.get("dataset") or {}
    name = ds.get("name") or "dataset"
    split = f" ({ds['split']})" if ds.get("split") else ""
    emb = results.get("embedder")
    return f"{name}{split} — {emb}" if emb else f"{name}{split}"


def _json_default(o: Any) -> Any:
    if hasattr(o, "tolist"):  # numpy scalars and arrays
        return o.tolist()
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    return str(o)


# ----------------------------------------------------------------------------- markdown


def _header_line(results: Mapping[str, Any]) -> str:
    ds = results.get("dataset") or {}
    parts = []
    if results.get("embedder"):
        parts.append(f"embedder `{results['embedder']}`")
    docs = f"{_int(ds.get('docs'))} docs"
    if ds.get("chunks") is not None:
        docs += f" → {_int(ds.get('chunks'))} chunks"
    parts.append(docs)
    parts.append(f"{_int(ds.get('queries'))} queries")
    if results.get("top_k") is not None or results.get("depth") is not None:
        parts.append(f"top_k {results.get('top_k', '?')}, depth {results.get('depth', '?')}")
    idx = results.get("index") or {}
    if idx:
        if idx.get("cached"):
            key = str(idx.get("key") or "")
            parts.append(f"index from cache (key `{key[:12]}{'…' if len(key) > 12 else ''}`)")
        else:
            built = f"index built in {_dur(idx.get('build_s', idx.get('index_s')))}"
            if idx.get("embed_s") is not None:
                built += f" (embedding {_dur(idx.get('embed_s'))})"
            parts.append(built)
    line = " · ".join(parts)
    meta = []
    if results.get("started"):
        meta.append(f"started {results['started']}")
    if results.get("took_s") is not None:
        meta.append(f"took {_dur(results['took_s'])}")
    if results.get("hybridmem_version"):
        meta.append(f"hybridmem {results['hybridmem_version']}")
    if ds.get("path"):
        meta.append(f"data `{ds['path']}`")
    return line + ("\n\n_" + " · ".join(meta) + "_" if meta else "")


def _overall_section(results: Mapping[str, Any]) -> list[str]:
    ok = _ok_modes(results)
    out = ["## Overall", ""]
    if ok:
        columns = []
        for key, _, higher in OVERALL_COLUMNS:
            if key.startswith("latency:"):
                vals = [(m.get("latency_ms") or {}).get(key.split(":", 1)[1]) for m in ok.values()]
                columns.append(_bold_best(vals, higher, digits=1))
            else:
                columns.append(_bold_best([_metric(m, key) for m in ok.values()], higher))
        rows = [[f"`{name}`", *(col[i] for col in columns)] for i, name in enumerate(ok)]
        out.append(_table(["mode", *(h for _, h, _ in OVERALL_COLUMNS)], rows))
        out.append("")
        out.append("Best value per column in **bold** (lowest for latency).")
    else:
        out.append("_No mode ran successfully._")
    others = {k: v for k, v in _modes(results).items() if k not in ok}
    if others:
        out.append("")
        out.append("Not evaluated:")
        out.append("")
        for name, m in others.items():
            m = m if isinstance(m, Mapping) else {}
            status, note = str(m.get("status", "missing")), str(m.get("note") or m.get("error") or "")
            if note.lower().startswith(status.lower()):  # the note already says "skipped: …"
                status, note = note, ""
            out.append(f"- `{name}` — {status}" + (f": {note}" if note else ""))
    return out


def _category_section(results: Mapping[str, Any]) -> list[str]:
    if not _has_categories(results):
        return []
    ok = _ok_modes(results)
    if not ok:
        return []
    cats = _categories(results)
    out = ["## By category", ""]
    for metric in ("mrr@10", "ndcg@10"):
        rows = []
        for c in cats:
            vals = _bold_best([_metric(m, metric, c) for m in ok.values()])
            label = "**all**" if c == "all" else _cell(c)
            rows.append([label, _int(_category_count(results, c)), *vals])
        out += [
            f"### {METRIC_LABELS[metric]} per category",
            "",
            _table(["category", "queries", *(f"`{m}`" for m in ok)], rows),
            "",
        ]
    return out[:-1]


def _verdict(comp: Mapping[str, Any]) -> str:
    p = _num(comp.get("p_randomization"))
    if p is None:
        p = _num(comp.get("p_bootstrap"))
    if p is None:
        ci = comp.get("ci95") or []
        if len(ci) == 2 and _num(ci[0]) is not None and _num(ci[1]) is not None:
            sig = ci[0] > 0 or ci[1] < 0
        else:
            return "no test available"
    else:
        sig = p < ALPHA
    if not sig:
        return "not significant: could be noise"
    diff = _num(comp.get("mean_diff")) or 0.0
    a, b = comp.get("a", "a"), comp.get("b", "b")
    better = a if diff > 0 else b
    return f"significant at {ALPHA:g}: `{better}` is better"


def _language_section(results: Mapping[str, Any]) -> list[str]:
    """nDCG@10 per query language, when the harness reports more than one (``by_language``)."""
    by_lang = results.get("by_language")
    if not isinstance(by_lang, Mapping) or not by_lang:
        return []
    modes = [m for m in by_lang if isinstance(by_lang[m], Mapping)]
    langs: list[str] = []
    for m in modes:
        langs += [lang for lang in by_lang[m] if lang != "all" and lang not in langs]
    if len(langs) < 2:
        return []
    rows = []
    for lang in [*langs, "all"]:
        cells = [by_lang[m].get(lang) or {} for m in modes]
        n = next((c.get("queries") for c in cells if c.get("queries") is not None), None)
        label = "**all**" if lang == "all" else _cell(lang)
        rows.append([label, _int(n), *_bold_best([c.get("ndcg@10") for c in cells])])
    return ["## nDCG@10 per language", "", _table(["language", "queries", *(f"`{m}`" for m in modes)], rows)]


def _comparison_section(results: Mapping[str, Any]) -> list[str]:
    comps = [c for c in results.get("comparisons") or [] if isinstance(c, Mapping)]
    if not comps:
        return []
    rows = []
    for c in comps:
        ci = c.get("ci95") or []
        ci_txt = f"[{_signed(ci[0])}, {_signed(ci[1])}]" if len(ci) == 2 else "—"
        label = c.get("label") or f"{c.get('a', '?')} vs {c.get('b', '?')}"
        rows.append(
            [
                _cell(label),
                c.get("metric", "?"),
                _signed(c.get("mean_diff")),
                ci_txt,
                _pval(c.get("p_bootstrap")),
                _pval(c.get("p_randomization")),
                _int(c.get("queries")),
                _verdict(c),
            ]
        )
    return [
        "## Paired comparisons",
        "",
        "Mean per-query difference (a − b), bootstrap 95% CI, two-sided p-values.",
        "",
        _table(
            [
                "comparison (a vs b)",
                "metric",
                "mean diff",
                "95% CI",
                "p (bootstrap)",
                "p (randomization)",
                "queries",
                "verdict",
            ],
            rows,
            ["l", "l", "r", "r", "r", "r", "r", "l"],
        ),
    ]


def _reference_section(results: Mapping[str, Any]) -> list[str]:
    refs = [r for r in results.get("references") or [] if isinstance(r, Mapping)]
    if not refs:
        return []
    ok = _ok_modes(results)
    rows = []
    for r in refs:
        metric = r.get("metric", "ndcg@10")
        ours = [_fmt(_metric(m, metric)) for m in ok.values()]
        rows.append([_cell(r.get("system", "?")), metric, _fmt(r.get("value")), *ours, _cell(r.get("source", ""))])
    return [
        "## Published references",
        "",
        _table(
            ["published system", "metric", "published", *(f"ours: `{m}`" for m in ok), "source"],
            rows,
            ["l", "l", *["r"] * (1 + len(ok)), "l"],
        ),
    ]


def _target_section(results: Mapping[str, Any]) -> list[str]:
    targets = [t for t in results.get("targets") or [] if isinstance(t, Mapping)]
    if not targets:
        return []
    labels = any(t.get("label") for t in targets)
    rows = []
    for t in targets:
        measured, target = _num(t.get("measured")), _num(t.get("target"))
        met = t.get("met")
        if met is None and measured is not None and target is not None:
            met = measured >= target
        gap = t.get("gap")
        if gap is None and measured is not None and target is not None:
            gap = measured - target
        mark = "✅" if met else "❌" if met is not None else "?"
        rows.append(
            [
                *([_cell(t.get("label", ""))] if labels else []),
                f"`{t.get('mode', '?')}`",
                t.get("metric", "?"),
                _fmt(target),
                _fmt(measured),
                mark,
                _signed(gap),
                _cell(t.get("why", "")),
            ]
        )
    return [
        "## Targets",
        "",
        _table(
            [*(["target"] if labels else []), "mode", "metric", "target", "measured", "met", "gap", "why"],
            rows,
            [*(["l"] if labels else []), "l", "l", "r", "r", "c", "r", "l"],
        ),
    ]


def _params_text(params: Mapping[str, Any] | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in (params or {}).items()) or "—"


def _sweep_section(results: Mapping[str, Any]) -> list[str]:
    sweep = results.get("sweep")
    if not isinstance(sweep, Mapping):
        return []
    metric = sweep.get("metric", "ndcg@10")
    tune, report = sweep.get("tune_split", "tune"), sweep.get("report_split", "report")
    grid = [g for g in sweep.get("grid") or [] if isinstance(g, Mapping)]
    baseline, rec = sweep.get("baseline"), sweep.get("recommended")
    params = list(sweep.get("params") or [])
    for g in [*grid, *(x for x in (baseline, rec) if isinstance(x, Mapping))]:
        params += [p for p in (g.get("params") or {}) if p not in params]
    cats: list[str] = []
    for g in [*grid, *(x for x in (baseline, rec) if isinstance(x, Mapping))]:
        for part in ("tune", "report"):
            cats += [c for c in (g.get(part) or {}) if c not in cats]
    cats = (["all"] if "all" in cats else []) + [c for c in cats if c != "all"]

    def same(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
        return isinstance(a, Mapping) and isinstance(b, Mapping) and a.get("params") == b.get("params")

    entries = list(grid)
    if isinstance(baseline, Mapping) and not any(same(g, baseline) for g in grid):
        entries.insert(0, baseline)
    if isinstance(rec, Mapping) and not any(same(g, rec) for g in entries):
        entries.append(rec)

    def table(parts: Sequence[tuple[str, str]]) -> str:
        # a split's name prefixes its columns only when both splits share the table
        header = ["", *params, *(f"{name}: {c}" if len(parts) > 1 else c for _, name in parts for c in cats)]
        rows = []
        for g in entries:
            marks = (["baseline"] if same(g, baseline) else []) + (["⭐ recommended"] if same(g, rec) else [])
            row = [", ".join(marks), *(_cell((g.get("params") or {}).get(p, "—")) for p in params)]
            row += [_fmt((g.get(part) or {}).get(c)) for part, _ in parts for c in cats]
            rows.append([f"**{x}**" if x not in ("", "—") else x for x in row] if marks else row)
        return _table(header, rows, ["l", *["r"] * (len(header) - 1)])

    counts = ""
    if sweep.get("tune_queries") is not None and sweep.get("report_queries") is not None:
        counts = f" ({_int(sweep['tune_queries'])} and {_int(sweep['report_queries'])} queries)"
    out = [
        "## Parameter sweep",
        "",
        (
            f"{METRIC_LABELS.get(metric, metric)} per category; settings are chosen on the `{tune}` split "
            f"and reported on the `{report}` split{counts}."
        ),
        "",
    ]
    if entries and len(cats) <= 3:  # tune and report side by side while the table stays narrow
        out += [table([("tune", tune), ("report", report)]), ""]
    elif entries:
        out += [
            f"### Tuned on `{tune}`",
            "",
            table([("tune", tune)]),
            "",
            f"### Reported on `{report}`",
            "",
            table([("report", report)]),
            "",
        ]
    if sweep.get("verdict"):
        out.append(f"**Verdict:** {sweep['verdict']}")
        out.append("")
    if isinstance(rec, Mapping):
        line = f"**Recommended:** {_params_text(rec.get('params'))}"
        r_all, b_all = (rec.get("report") or {}).get("all"), ((baseline or {}).get("report") or {}).get("all")
        if _num(r_all) is not None and _num(b_all) is not None:
            line += (
                f" — {report} {METRIC_LABELS.get(metric, metric)} (all) {_fmt(r_all)} vs baseline "
                f"{_fmt(b_all)} ({_signed(cast(float, _num(r_all)) - cast(float, _num(b_all)))})"
            )
        out.append(line)
    else:
        base = f" ({_params_text(baseline.get('params'))})" if isinstance(baseline, Mapping) else ""
        out.append(f"**Recommended:** none — keep the baseline{base}.")
    return out


def _notes_section(results: Mapping[str, Any]) -> list[str]:
    notes = results.get("notes") or []
    if isinstance(notes, str):
        notes = [notes]
    return ["## Notes", "", *(f"- {n}" for n in notes)] if notes else []


def render_markdown(results: Mapping[str, Any], *, charts: bool = True) -> str:
    """The report as markdown; ``charts`` embeds the PNGs that :func:`write_report` writes next to it."""
    ds = results.get("dataset") or {}
    title = f"# hybridmem evaluation — {ds.get('name') or 'dataset'}"
    if ds.get("split"):
        title += f" ({ds['split']})"
    blocks = [
        [title, "", _header_line(results)],
        _overall_section(results),
        _category_section(results),
        _language_section(results),
        _comparison_section(results),
        _reference_section(results),
        _target_section(results),
        _sweep_section(results),
        _notes_section(results),
    ]
    if charts:
        by_cat = "MRR@10 and nDCG@10 per category" if _has_categories(results) else "MRR@10 and nDCG@10"
        blocks.append(
            [
                "## Charts",
                "",
                f"![{by_cat} per mode](metric_by_category.png)",
                "",
                "![Recall@k per mode](recall_curve.png)",
            ]
        )
    return "\n\n".join("\n".join(b) for b in blocks if b) + "\n"


# ----------------------------------------------------------------------------- charts


def _bar_labels(ax: Any, bars: Any, values: Sequence[float | None], fontsize: float, rotate: bool) -> None:
    for bar, v in zip(bars, values):
        if v is None:
            continue
        ax.annotate(
            f"{v:.3f}"[1:] if 0 <= v < 1 else f"{v:.3f}",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            xytext=(0, 2),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=fontsize,
            rotation=90 if rotate else 0,
            zorder=4,
            # a light box keeps the label readable over grid and reference lines
            bbox={"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.7},
        )


def _empty(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=11, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def plot_metric_by_category(results: Mapping[str, Any], path: Path) -> Path:
    """Two panels (MRR@10, nDCG@10): grouped bars, x = categories ("all" last), one bar per ok mode."""
    plt = _pyplot()
    ok = _ok_modes(results)
    cats = _categories(results) if _has_categories(results) else ["all"]
    n_bars = len(cats) * max(1, len(ok))
    width_in = min(17.0, max(8.0 if len(cats) == 1 else 10.0, 2 * (1.2 + 0.28 * n_bars + 0.25 * len(cats))))
    fig, axes = plt.subplots(1, 2, figsize=(width_in, 5.2 if n_bars <= 12 else 6.0), sharey=True)
    colors = _mode_colors(ok)
    # value labels turn vertical once a bar is narrower than the text (".123" at 8 pt is ~0.25 in)
    bar_in = (width_in / 2 - 0.8) / len(cats) * 0.8 / max(1, len(ok))
    rotate = bar_in < 0.32
    fontsize = 7 if bar_in < 0.2 else 8
    ymax = 0.0
    for ax, metric in zip(axes, ("mrr@10", "ndcg@10")):
        ax.set_title(METRIC_LABELS[metric])
        if not ok:
            _empty(ax, "no mode ran successfully")
            continue
        w = 0.8 / len(ok)
        for i, (name, mode) in enumerate(ok.items()):
            vals = [_num(_metric(mode, metric, c)) for c in cats]
            xs = [j + (i - (len(ok) - 1) / 2) * w for j in range(len(cats))]
            bars = ax.bar(xs, [v or 0.0 for v in vals], w * 0.95, label=name, color=colors[name])
            _bar_labels(ax, bars, vals, fontsize, rotate)
            ymax = max(ymax, *(v or 0.0 for v in vals))
        labels = [f"{c}\n(n={_int(_category_count(results, c))})" for c in cats]
        many = len(cats) > 5
        ax.set_xticks(
            range(len(cats)),
            labels,
            rotation=30 if many else 0,
            ha="right" if many else "center",
            fontsize=8 if many else 9,
        )
        ax.set_xlabel("query category" if len(cats) > 1 else "")
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
        for j in range(len(cats) - 1):  # separate the category groups
            ax.axvline(j + 0.5, color="0.9", lw=0.8, zorder=0)
    what = "by category" if len(cats) > 1 else "over all queries"
    title = _wrap(f"MRR@10 and nDCG@10 {what} — {_title(results)}", fig, 12)
    fig.suptitle(title, fontsize=12)
    extra = 0.22 * title.count("\n")  # inches each further title line takes
    if ok:
        axes[0].set_ylabel("score (mean over queries)")
        axes[0].set_ylim(0, min(1.0, ymax) * 1.18 + 0.02 if ymax > 0 else 1.0)
        handles, labels = axes[0].get_legend_handles_labels()
        # own row under the title, so long titles never run into it
        fig.legend(
            handles,
            labels,
            loc="upper center",
            ncol=len(ok),
            frameon=False,
            bbox_to_anchor=(0.5, 1 - (0.4 + extra) / fig.get_figheight()),
        )
    fig.tight_layout(rect=(0, 0, 1, 1 - (0.6 + extra) / fig.get_figheight()))
    path = Path(path)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def plot_recall_curve(results: Mapping[str, Any], path: Path) -> Path:
    """Recall@k against k (log x axis), one line per ok mode with a recall curve."""
    plt = _pyplot()
    ok = {
        k: v
        for k, v in _ok_modes(results).items()
        if (v.get("recall_curve") or {}).get("k") and (v.get("recall_curve") or {}).get("recall")
    }
    colors = _mode_colors(ok)
    fig, ax = plt.subplots(figsize=(8, 5))
    if not ok:
        _empty(ax, "no recall curve available")
    for name, mode in ok.items():
        curve = mode["recall_curve"]
        pairs = [(int(k), _num(r)) for k, r in zip(curve["k"], curve["recall"]) if _num(k) and _num(r) is not None]
        if not pairs:
            continue
        ks, rs = zip(*pairs)
        marks = [i for i, k in enumerate(ks) if k in (1, 5, 10, 100)]
        ax.plot(
            ks,
            rs,
            label=f"{name} (R@{ks[-1]} = {rs[-1]:.3f})",
            color=colors[name],
            lw=2,
            marker="o",
            markevery=marks or None,
            ms=4,
        )
    if ok:
        ax.set_xscale("log")
        ax.set_xlabel("k (rank cut-off, log scale)")
        ax.set_ylabel("recall@k (mean over queries)")
        ax.set_ylim(0, 1.02)
        top_k = _num(results.get("top_k"))
        if top_k:
            ax.axvline(top_k, color="0.5", ls="--", lw=1)
            ax.annotate(
                f"top_k = {int(top_k)}",
                (top_k, 0.02),
                xytext=(4, 0),
                textcoords="offset points",
                fontsize=8,
                color="0.4",
            )
        from matplotlib.ticker import FixedLocator, ScalarFormatter

        ticks = [
            t
            for t in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
            if t <= max(max(map(int, m["recall_curve"]["k"])) for m in ok.values())
        ]
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.grid(True, which="major", alpha=0.3)
        ax.grid(True, which="minor", alpha=0.1)
        ax.legend(title="mode", loc="lower right")
    ax.set_title(_wrap(f"Recall@k — {_title(results)}", fig, 12), fontsize=12)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


# ----------------------------------------------------------------------------- report files


def write_report(results: Mapping[str, Any], out_dir: Path) -> dict[str, Path]:
    """Write ``results.json``, ``report.md``, ``metric_by_category.png`` and ``recall_curve.png``.

    Returns the paths by key: "json", "markdown", "metric_by_category", "recall_curve".
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "results.json", "markdown": out_dir / "report.md"}
    paths["json"].write_text(
        json.dumps(results, indent=2, ensure_ascii=False, default=_json_default) + "\n", encoding="utf-8"
    )
    paths["metric_by_category"] = plot_metric_by_category(results, out_dir / "metric_by_category.png")
    paths["recall_curve"] = plot_recall_curve(results, out_dir / "recall_curve.png")
    paths["markdown"].write_text(render_markdown(results), encoding="utf-8")
    return paths


# ----------------------------------------------------------------------------- several datasets


def _run_modes(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    modes: list[str] = []
    for r in runs:
        modes += [m for m in _ok_modes(r) if m not in modes]
    return sorted(modes, key=lambda m: (MODES.index(m) if m in MODES else len(MODES), modes.index(m)))


def _best_leg(run: Mapping[str, Any], metric: str = "ndcg@10") -> tuple[str | None, Mapping[str, Any] | None]:
    """The best single leg and the hybrid-vs-that-leg comparison, when the run has one."""
    comp = next(
        (
            c
            for c in run.get("comparisons") or []
            if isinstance(c, Mapping)
            and c.get("a") == "hybrid"
            and c.get("metric") == metric
            and (c.get("best_single_leg") or "best" in str(c.get("label", "")))
        ),
        None,
    )
    comp = comp or next(
        (
            c
            for c in run.get("comparisons") or []
            if isinstance(c, Mapping) and c.get("a") == "hybrid" and c.get("metric") == metric
        ),
        None,
    )
    if comp is not None:
        return comp.get("b"), comp
    ok = _ok_modes(run)
    legs = [m for m in ("bm25", "vector") if m in ok and _num(_metric(ok[m], metric)) is not None]
    if not legs:
        return None, None
    return max(legs, key=lambda m: cast(float, _num(_metric(ok[m], metric)))), None


def render_summary(runs: Sequence[Mapping[str, Any]]) -> str:
    """A markdown section comparing nDCG@10 across several datasets' results."""
    metric = "ndcg@10"
    modes = _run_modes(runs)
    rows = []
    for run in runs:
        ds = run.get("dataset") or {}
        ok = _ok_modes(run)
        name = _cell(ds.get("name") or "?") + (f" ({ds['split']})" if ds.get("split") else "")
        vals = _bold_best([_metric(ok[m], metric) if m in ok else None for m in modes])
        leg, comp = _best_leg(run, metric)
        leg_val = _metric(ok[leg], metric) if leg in ok else None
        leg_txt = f"`{leg}` {_fmt(leg_val)}" if leg else "—"
        if comp is not None:
            diff, p = _signed(comp.get("mean_diff")), _pval(comp.get("p_randomization"))
            if p != "—" and cast(float, _num(comp.get("p_randomization"))) < ALPHA:
                diff = f"**{diff}**"
        else:
            h = _num(_metric(ok["hybrid"], metric)) if "hybrid" in ok else None
            diff = _signed(h - cast(float, _num(leg_val))) if h is not None and _num(leg_val) is not None else "—"
            p = "—"
        refs = "; ".join(
            f"{_cell(r.get('system', '?'))} {_fmt(r.get('value'))}"
            for r in run.get("references") or []
            if isinstance(r, Mapping) and r.get("metric", metric) == metric
        )
        rows.append([name, _int(ds.get("queries")), *vals, leg_txt, diff, p, refs or "—"])
    header = [
        "dataset",
        "queries",
        *(f"`{m}`" for m in modes),
        "best single leg",
        "hybrid − best leg",
        "p (randomization)",
        "published",
    ]
    embedders = sorted({str(r.get("embedder")) for r in runs if r.get("embedder")})
    out = [
        "## Summary across datasets",
        "",
        f"nDCG@10 per mode (best per dataset in **bold**; a bold difference is significant at {ALPHA:g})"
        + (f"; embedder {', '.join(f'`{e}`' for e in embedders)}." if embedders else "."),
        "",
    ]
    if runs:
        out.append(_table(header, rows, ["l", *["r"] * (len(header) - 2), "l"]))
    else:
        out.append("_No runs._")
    return "\n".join(out) + "\n"


def write_summary_chart(runs: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Grouped bars of nDCG@10: x = dataset, one bar per mode; published references as black ticks."""
    plt = _pyplot()
    metric = "ndcg@10"
    modes = _run_modes(runs)
    colors = _mode_colors(modes)
    names = [str((r.get("dataset") or {}).get("name") or "?") for r in runs]
    n_bars = len(runs) * max(1, len(modes))
    fig, ax = plt.subplots(figsize=(min(20.0, max(8.0, 1.5 + 0.45 * n_bars)), 5.2))
    if not runs or not modes:
        _empty(ax, "no successful runs")
    else:
        w = 0.8 / len(modes)
        rotate = (fig.get_figwidth() - 2.5) / len(runs) * w < 0.32
        for i, m in enumerate(modes):
            vals = [_num(_metric(_ok_modes(r)[m], metric)) if m in _ok_modes(r) else None for r in runs]
            xs = [j + (i - (len(modes) - 1) / 2) * w for j in range(len(runs))]
            bars = ax.bar(xs, [v or 0.0 for v in vals], w * 0.95, label=m, color=colors[m])
            _bar_labels(ax, bars, vals, 7 if n_bars > 12 else 8, rotate)
        ref_label = "published reference"
        for j, r in enumerate(runs):
            for ref in r.get("references") or []:
                v = _num(ref.get("value")) if isinstance(ref, Mapping) else None
                if v is None or ref.get("metric", metric) != metric:
                    continue
                ax.hlines(v, j - 0.45, j + 0.45, colors="black", linestyles="--", lw=1.2, label=ref_label, zorder=3)
                ref_label = "_nolegend_"
        ax.set_xticks(
            range(len(runs)), names, rotation=20 if len(runs) > 6 else 0, ha="right" if len(runs) > 6 else "center"
        )
        ax.set_xlabel("dataset")
        ax.set_ylabel("nDCG@10 (mean over queries)")
        ax.set_ylim(0, 1.05)
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
        ax.legend(title="mode", loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    embedders = sorted({str(r.get("embedder")) for r in runs if r.get("embedder")})
    ax.set_title("nDCG@10 per dataset and mode" + (f" — {', '.join(embedders)}" if embedders else ""), fontsize=12)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path
