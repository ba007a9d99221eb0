"""Turn an evaluation results dict into files: ``results.json``, ``report.md`` and PNG charts.

matplotlib is imported lazily (Agg backend) by the chart functions only, so importing this
package — and ``hybridmem`` — stays light; without matplotlib they raise ``ImportError`` with a hint.

Its modules: :mod:`.common` (columns, formats, reading a results dict), :mod:`.markdown` (the
report), :mod:`.charts` (its PNGs), :mod:`.summary` (several datasets: a table and a chart).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .charts import plot_metric_by_category, plot_recall_curve
from .common import OVERALL_COLUMNS
from .markdown import render_markdown
from .summary import render_summary, write_summary_chart

__all__ = [
    "OVERALL_COLUMNS",
    "plot_metric_by_category",
    "plot_recall_curve",
    "render_markdown",
    "render_summary",
    "write_report",
    "write_summary_chart",
]


def _json_default(o: Any) -> Any:
    if hasattr(o, "tolist"):  # numpy scalars and arrays
        return o.tolist()
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    return str(o)


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
