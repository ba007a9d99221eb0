"""The markdown report of one evaluation: header, overall table, categories, languages,
comparisons, published references, targets, sweeps, notes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from .common import (
    ALPHA,
    METRIC_LABELS,
    OVERALL_COLUMNS,
    _bold_best,
    _categories,
    _category_count,
    _cell,
    _dur,
    _fmt,
    _has_categories,
    _int,
    _metric,
    _modes,
    _num,
    _ok_modes,
    _pval,
    _signed,
    _table,
)


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
