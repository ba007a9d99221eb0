"""What the report's markdown and charts share: the overall table's columns, the number
formats, markdown tables, and reading the modes, metrics and categories of a results dict."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

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


def _title(results: Mapping[str, Any]) -> str:
    ds = results.get("dataset") or {}
    name = ds.get("name") or "dataset"
    split = f" ({ds['split']})" if ds.get("split") else ""
    emb = results.get("embedder")
    return f"{name}{split} — {emb}" if emb else f"{name}{split}"
