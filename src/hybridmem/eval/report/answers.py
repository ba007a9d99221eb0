"""The report of an answer-level evaluation (:mod:`hybridmem.eval.answers`): J, F1 and BLEU-1
overall and per category, per mode; tokens and cost per role; paired comparisons; published
numbers for context; notes. Written as ``results.json`` and ``report.md``, like the retrieval report."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .common import _bold_best, _categories, _cell, _dur, _int, _metric, _ok_modes, _table
from .markdown import _comparison_section, _notes_section

__all__ = ["MEM0_PAPER", "render_answer_markdown", "write_answer_report"]

#: overall J (%) of the Mem0 paper's Table 1 (arXiv:2504.19413): all 10 LoCoMo conversations,
#: category 5 left out, gpt-4o-mini answering and judging
MEM0_PAPER = {"Mem0": 66.88, "Mem0 (graph)": 68.44, "Zep": 65.99, "LangMem": 58.10, "OpenAI memory": 52.90}

_OVERALL = (("j", "J"), ("f1", "F1"), ("bleu1", "BLEU-1"), ("recall@10", "R@10 (evidence)"))


def _usd(x: Any) -> str:
    if isinstance(x, (int, float)):
        return f"${x:,.4f}" if x < 1 else f"${x:,.2f}"
    return str(x or "unknown")


def _header(results: Mapping[str, Any]) -> list[str]:
    ds = results.get("dataset") or {}
    title = f"# hybridmem answer evaluation — {ds.get('name') or 'dataset'}"
    line = (
        f"answerer `{results.get('answerer')}` · judge `{results.get('judge')}` · embedder `{results.get('embedder')}`"
        f" · top_k {results.get('top_k')} · {_int(ds.get('queries'))} questions"
        f" (of {_int(ds.get('questions_in_set'))}) · {_int(ds.get('docs'))} turns"
    )
    meta = " · ".join(
        x
        for x in (
            f"started {results['started']}" if results.get("started") else "",
            f"took {_dur(results.get('took_s'))}",
            f"hybridmem {results.get('hybridmem_version')}",
            f"data `{ds.get('path')}`" if ds.get("path") else "",
        )
        if x
    )
    return [title, "", line, "", f"_{meta}_"]


def _overall(results: Mapping[str, Any]) -> list[str]:
    ok = _ok_modes(results)
    if not ok:
        return []
    cols = [_bold_best([_metric(m, k) for m in ok.values()]) for k, _ in _OVERALL]
    rows = []
    for i, (name, m) in enumerate(ok.items()):
        all_ = (m.get("metrics") or {}).get("all") or {}
        errs = m.get("errors") or {}
        rows.append(
            [
                f"`{name}`",
                *(c[i] for c in cols),
                f"{_int(all_.get('correct'))} / {_int(all_.get('queries'))}",
                f"{_int(errs.get('answer'))} / {_int(errs.get('judge'))}",
            ]
        )
    return [
        "## Overall",
        "",
        _table(["mode", *(h for _, h in _OVERALL), "CORRECT", "errors (answer / judge)"], rows),
        "",
        "J = share of questions the judge labelled CORRECT. R@10 is the retrieval of the evidence turns, for "
        "context. Best value per column in **bold**.",
    ]


def _by_category(results: Mapping[str, Any]) -> list[str]:
    ok = _ok_modes(results)
    cats = _categories(results)
    if not ok or len(cats) < 3:
        return []
    out = ["## By category", ""]
    for key, label in _OVERALL[:3]:
        rows = []
        for c in cats:
            n = next((((m.get("metrics") or {}).get(c) or {}).get("queries") for m in ok.values()), None)
            rows.append(
                ["**all**" if c == "all" else _cell(c), _int(n), *_bold_best([_metric(m, key, c) for m in ok.values()])]
            )
        out += [f"### {label} per category", "", _table(["category", "questions", *(f"`{m}`" for m in ok)], rows), ""]
    return out[:-1]


def _tokens(results: Mapping[str, Any]) -> list[str]:
    t = results.get("tokens") or {}
    rows = []
    for role in ("answerer", "judge"):
        r = t.get(role) or {}
        if not r:
            continue
        price = r.get("price_per_1m")
        price_txt = f"${price['input']} / ${price['output']} (as `{r.get('priced_as')}`)" if price else "unknown"
        rows.append(
            [
                role,
                f"`{r.get('model')}`",
                _int(r.get("calls")),
                _int(r.get("cached")),
                f"{_int(r.get('prompt_tokens'))} / {_int(r.get('completion_tokens'))}",
                f"{_int(r.get('prompt_tokens_all'))} / {_int(r.get('completion_tokens_all'))}",
                price_txt,
                _usd(r.get("cost_usd")),
                _usd(r.get("cost_usd_all")),
            ]
        )
    if not rows:
        return []
    out = [
        "## Tokens and cost",
        "",
        _table(
            [
                "role",
                "model",
                "calls now",
                "from cache",
                "tokens now (prompt / completion)",
                "tokens, whole run",
                "USD per 1M (in / out)",
                "cost now",
                "cost, whole run",
            ],
            rows,
            ["l", "l", "r", "r", "r", "r", "r", "r", "r"],
        ),
        "",
        f"Total: {_usd(t.get('cost_usd'))} spent by this run, {_usd(t.get('cost_usd_all'))} for the whole run "
        f"(cached calls priced as when they were made). Prices of {results.get('prices_date')}; override with "
        "`--prices FILE.json`.",
    ]
    full = t.get("full_set")
    if full:
        out.append(
            f"At this run's rate, all {_int(full['questions'])} questions would take about "
            f"{_int(full['prompt_tokens'])} prompt and {_int(full['completion_tokens'])} completion tokens: "
            f"{_usd(full['cost_usd'])}."
        )
    return out


def _references() -> list[str]:
    rows = [[_cell(k), f"{v:.2f}"] for k, v in MEM0_PAPER.items()]
    return [
        "## Published numbers (context, not a like-for-like comparison)",
        "",
        "Overall J (%) in the Mem0 paper (Chhikara et al. 2025, arXiv:2504.19413, Table 1): all 10 LoCoMo "
        "conversations (this file may hold fewer), category 5 left out, `gpt-4o-mini` answering and judging.",
        "",
        _table(["system", "J (%)"], rows),
    ]


def render_answer_markdown(results: Mapping[str, Any]) -> str:
    blocks = [
        _header(results),
        _overall(results),
        _by_category(results),
        _tokens(results),
        _comparison_section(results),
        _references(),
        _notes_section(results),
    ]
    return "\n\n".join("\n".join(b) for b in blocks if b) + "\n"


def write_answer_report(results: Mapping[str, Any], out_dir: Path) -> dict[str, Path]:
    """Write ``results.json`` (every question's answer, verdict and scores) and ``report.md``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "results.json", "markdown": out_dir / "report.md"}
    paths["json"].write_text(json.dumps(results, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    paths["markdown"].write_text(render_answer_markdown(results), encoding="utf-8")
    return paths
