"""Several datasets at once: a summary table (the best leg of each run against its references)
and a chart of nDCG@10 per dataset and mode."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from ...models import MODES
from .charts import _bar_labels, _empty, _mode_colors, _pyplot
from .common import ALPHA, DPI, _bold_best, _cell, _fmt, _int, _metric, _num, _ok_modes, _pval, _signed, _table


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
