"""The charts of one evaluation (PNG, matplotlib imported lazily with the Agg backend): a metric
per category and mode, recall@k per mode."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ...models import MODES
from .common import (
    DPI,
    INSTALL_HINT,
    METRIC_LABELS,
    _categories,
    _category_count,
    _has_categories,
    _int,
    _metric,
    _num,
    _ok_modes,
    _title,
)


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
