"""Answer-level evaluation on LoCoMo, the way published comparisons report it (Mem0, Zep, …):
for each question, retrieve in each mode (``Memory.search``, as the retrieval evaluation does),
answer with the grounded-answer pipeline (:func:`hybridmem.answer.llm_answer`: only the retrieved
turns, cited), and score the answer against the gold one: the LLM judge's CORRECT / WRONG (the
J score is the share CORRECT), token F1 and BLEU-1 (:mod:`.judge`). Per category and overall,
per mode; modes compared pairwise on J per question (paired bootstrap and randomization tests).

Adversarial questions (category 5: they ask about something never said) are left out by default,
as Mem0's evaluation and the comparisons built on it do; ``adversarial=True`` includes them, with
"Not mentioned in the conversation" as the gold answer.

Every call is cached (:mod:`.llm_cache`), so a re-run makes no call; prompt and completion tokens
are counted per role (answerer, judge) and priced from :mod:`.prices`. A failed answer (after the
LLM layer's retries) scores 0 everywhere and is counted; a failed verdict (no reply, or invalid
JSON after the repair attempt) is counted WRONG and reported; neither stops the run.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from itertools import combinations
from typing import Any

from .. import __version__
from ..answer import llm_answer
from ..embed import embedder_name
from ..errors import ValidationError
from ..llm.base import ChatModel
from ..memory import Memory
from ..models import QueryResult
from .conversations import CATEGORIES
from .datasets import Dataset
from .facts import FACT_MODES, build_facts, evidence_ranking, fact_request
from .index import open_index, utc_now
from .judge import NOT_MENTIONED, Verdict, bleu1, judge_messages, token_f1
from .llm_cache import CachedChatModel, CallCache, Tally
from .metrics import means_by_category, paired_test, per_query
from .modes import ALL_MODES, EvalConfig, Progress
from .prices import PRICES_DATE, Price, call_cost, load_prices, price_for
from .runner import _doc_ranking, search_request, warm_query_vectors

__all__ = ["ADVERSARIAL", "AnswerConfig", "ROLES", "run_answer_eval", "strip_citations"]

ADVERSARIAL = CATEGORIES[5]
ROLES = ("answerer", "judge")
#: the per-question scores averaged per category (J, the lexical scores, and retrieval's for context)
SCORES = ("j", "f1", "bleu1", "recall@5", "recall@10", "mrr@10")


@dataclass
class AnswerConfig:
    """The models of an answer-level run and how it runs."""

    answerer: ChatModel
    judge: ChatModel
    prices: dict[str, Price] = field(default_factory=lambda: load_prices(None))
    #: include LoCoMo's adversarial questions (category 5), judged against "not mentioned"
    adversarial: bool = False
    #: questions answered and judged at once (retrieval itself runs one query at a time)
    concurrency: int = 4


_CITATION = re.compile(r"\s*\[([^\[\]\n]{1,600})\]")


def strip_citations(text: str, chunk_ids: Sequence[str]) -> str:
    """The answer without its ``[chunk_id]`` citations (what the judge and the lexical scores see)."""
    known = set(chunk_ids)

    def sub(m: re.Match[str]) -> str:
        parts = [p.strip() for p in re.split(r"[,;]", m.group(1)) if p.strip()]
        return "" if parts and all(p in known for p in parts) else m.group(0)

    return " ".join(_CITATION.sub(sub, text).split())


def _gold(ds: Dataset, qid: str) -> str:
    return NOT_MENTIONED if ds.categories.get(qid) == ADVERSARIAL else ds.answers.get(qid, "")


def _questions(ds: Dataset, acfg: AnswerConfig, limit: int | None) -> tuple[list[str], int, int]:
    """The questions to answer (the first ``limit``), how many the full set has, and how many
    adversarial ones were left out."""
    keep = [q for q in ds.queries if acfg.adversarial or ds.categories.get(q) != ADVERSARIAL]
    return keep[:limit] if limit else keep, len(keep), len(ds.queries) - len(keep)


def check_answer_run(ds: Dataset, cfg: EvalConfig, acfg: AnswerConfig) -> None:
    if not ds.answers:
        raise ValidationError(
            f"{ds.name}: --answer needs a LoCoMo JSON file (questions with gold answers); this dataset has none",
            field="dataset",
        )
    known = [*ALL_MODES, *FACT_MODES]
    unknown = [m for m in cfg.modes if m not in known]
    if unknown:
        raise ValidationError(f"unknown mode(s) {', '.join(unknown)}; known: {', '.join(known)}", field="modes")
    if "graph" in cfg.modes:
        raise ValidationError("mode graph is not supported with --answer (retrieval-only for now)", field="modes")
    if not cfg.modes:
        raise ValidationError("no mode to evaluate", field="modes")
    if not 1 <= acfg.concurrency <= 64:
        raise ValidationError("concurrency must be 1..64", field="concurrency")


# ---------------------------------------------------------------------------------------- one question
def _score_one(
    ds: Dataset, qid: str, results: list[QueryResult], acfg: AnswerConfig, cache: CallCache
) -> tuple[dict[str, Any], Tally, Tally]:
    """Answer and judge one question; returns its row and what each role spent."""
    question, gold = ds.queries[qid], _gold(ds, qid)
    chunk_ids = [r.chunk_id for r in results]
    spent, judged = Tally(), Tally()
    row: dict[str, Any] = {"question": question, "gold": gold, "category": ds.categories.get(qid)}
    try:
        draft = llm_answer(question, results, CachedChatModel(acfg.answerer, cache, spent, chunk_ids))
    except Exception as e:  # noqa: BLE001 - one failed answer must not sink the run: counted, scored 0
        row.update(answer="", answer_error=f"{type(e).__name__}: {e}"[:500], label=None, j=0.0, f1=0.0, bleu1=0.0)
        return row, spent, judged
    plain = strip_citations(draft.answer, chunk_ids)
    row.update(answer=plain, found=draft.found, cited=draft.cited, f1=token_f1(plain, gold), bleu1=bleu1(plain, gold))
    if draft.notes:
        row["answer_notes"] = draft.notes
    judge = CachedChatModel(acfg.judge, cache, judged)
    try:
        out = judge.complete(judge_messages(question, gold, plain), schema=Verdict, purpose="judge")
        verdict = out.data
        assert isinstance(verdict, Verdict)
        row.update(label=verdict.label, reasoning=verdict.reasoning, j=1.0 if verdict.label == "CORRECT" else 0.0)
    except Exception as e:  # noqa: BLE001 - counted WRONG and reported, never fatal
        row.update(label=None, judge_error=f"{type(e).__name__}: {e}"[:500], j=0.0)
    return row, spent, judged


# ---------------------------------------------------------------------------------------- one mode
def _run_mode(
    mem: Memory,
    ds: Dataset,
    mode: str,
    cfg: EvalConfig,
    acfg: AnswerConfig,
    cache: CallCache,
    progress: Progress | None,
) -> dict[str, Any]:
    retrieved: dict[str, list[QueryResult]] = {}
    scores: dict[str, dict[str, float]] = {}
    reranked = Tally()  # mode rerank's LLM calls (not cached: retrieval is not)
    facts = mode in FACT_MODES
    for qid in ds.queries:  # retrieval first, one query at a time (as the retrieval evaluation runs)
        resp = mem.search(fact_request(ds, qid, mode, cfg.top_k) if facts else search_request(ds, qid, mode, cfg.top_k))
        reranked.spend(resp.usage)
        retrieved[qid] = list(resp.results)
        rank = per_query(evidence_ranking(resp) if facts else _doc_ranking(resp), ds.qrels[qid])
        scores[qid] = {k: rank[k] for k in ("recall@5", "recall@10", "mrr@10")}
    tick = progress(f"{mode}: answering and judging", len(ds.queries)) if progress else None
    rows: dict[str, dict[str, Any]] = {}
    tallies = {role: Tally() for role in ROLES}

    def work(qid: str) -> tuple[dict[str, Any], Tally, Tally]:
        return _score_one(ds, qid, retrieved[qid], acfg, cache)

    with ThreadPoolExecutor(max_workers=acfg.concurrency) as pool:
        for qid, (row, spent, judged) in zip(ds.queries, pool.map(work, ds.queries)):
            row["retrieved"] = [r.chunk_id for r in retrieved[qid]]
            rows[qid] = row
            scores[qid] = {"j": row["j"], "f1": row["f1"], "bleu1": row["bleu1"], **scores[qid]}
            tallies["answerer"].add(spent)
            tallies["judge"].add(judged)
            if tick:
                tick(1)
    metrics = means_by_category({q: {k: s[k] for k in SCORES} for q, s in scores.items()}, ds.categories)
    for cat, m in metrics.items():
        in_cat = [r for q, r in rows.items() if cat == "all" or ds.categories.get(q) == cat]
        m["correct"] = sum(1 for r in in_cat if r.get("label") == "CORRECT")
    out: dict[str, Any] = {
        "status": "ok",
        "queries": len(rows),
        "metrics": metrics,
        "per_query": scores,
        "answers": rows,
        "errors": {
            "answer": sum(1 for r in rows.values() if "answer_error" in r),
            "judge": sum(1 for r in rows.values() if "judge_error" in r),
        },
        "tokens": {role: asdict(t) for role, t in tallies.items()},
    }
    if reranked.calls:
        out["rerank_tokens"] = asdict(reranked)
    return out


# ---------------------------------------------------------------------------------------- tokens, cost
def cost_summary(tally: Tally, model: str, prices: dict[str, Price]) -> dict[str, Any]:
    """A role's tokens and their cost: this run's (calls made now) and the whole run's (cached
    calls priced as when they were made)."""
    hit = price_for(model, prices)
    all_p, all_c = (
        tally.prompt_tokens + tally.cached_prompt_tokens,
        tally.completion_tokens + tally.cached_completion_tokens,
    )
    return {
        "model": model,
        **asdict(tally),
        "prompt_tokens_all": all_p,
        "completion_tokens_all": all_c,
        "priced_as": hit[0] if hit else None,
        "price_per_1m": {"input": hit[1][0], "output": hit[1][1]} if hit else None,
        "cost_usd": call_cost(model, tally.prompt_tokens, tally.completion_tokens, prices),
        "cost_usd_all": call_cost(model, all_p, all_c, prices),
    }


def _token_report(modes: dict[str, dict[str, Any]], acfg: AnswerConfig, answered: int, full: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for role, model in (("answerer", acfg.answerer.name), ("judge", acfg.judge.name)):
        total = Tally()
        for r in modes.values():
            total.add(Tally(**r["tokens"][role]))
        out[role] = cost_summary(total, model, acfg.prices)
    costs = [out[r]["cost_usd_all"] for r in ROLES]
    new = [out[r]["cost_usd"] for r in ROLES]
    known = all(isinstance(c, float) for c in costs)
    out["calls"] = sum(out[r]["calls"] for r in ROLES)
    out["cached"] = sum(out[r]["cached"] for r in ROLES)
    out["cost_usd"] = round(sum(new), 10) if all(isinstance(c, float) for c in new) else "unknown"
    out["cost_usd_all"] = round(sum(costs), 10) if known else "unknown"
    if answered and full > answered:  # --limit: what the whole set would cost at this rate
        out["full_set"] = {
            "questions": full,
            "cost_usd": round(sum(costs) * full / answered, 6) if known else "unknown",
            "prompt_tokens": round(sum(out[r]["prompt_tokens_all"] for r in ROLES) * full / answered),
            "completion_tokens": round(sum(out[r]["completion_tokens_all"] for r in ROLES) * full / answered),
        }
    return out


def _comparisons(modes: dict[str, dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """Every pair of modes, in the order given, on J and F1 per question."""
    out = []
    names = [m for m, r in modes.items() if r.get("status") == "ok"]
    for a, b in combinations(names, 2):
        qids = list(modes[a]["per_query"])
        for met in ("j", "f1"):
            res = paired_test(
                [modes[a]["per_query"][q][met] for q in qids], [modes[b]["per_query"][q][met] for q in qids], seed=seed
            )
            out.append({"a": a, "b": b, "metric": met, "label": f"{a} vs {b}", **res})
    return out


# ---------------------------------------------------------------------------------------- the run
def run_answer_eval(
    ds: Dataset, cfg: EvalConfig, acfg: AnswerConfig, *, progress: Progress | None = None
) -> dict[str, Any]:
    """Answer, judge and score every question of ``ds`` (a LoCoMo set) in each of ``cfg.modes``."""
    check_answer_run(ds, cfg, acfg)
    started, t0 = utc_now(), time.perf_counter()
    qids, full, left_out = _questions(ds, acfg, cfg.limit)
    if not qids:
        raise ValidationError(
            f"no question to answer: {left_out} adversarial question(s) left out (--adversarial includes them)",
            field="dataset",
        )
    ds = ds.subset(qids, ds.split)
    need_vectors = any(m != "bm25" for m in cfg.modes)
    mem, index = open_index(ds, cfg, need_vectors, progress)
    cache = CallCache(cfg.cache_dir / "answers.db")
    try:
        if need_vectors:
            warm_query_vectors(mem, ds, progress)
        modes = {m: _run_mode(mem, ds, m, cfg, acfg, cache, progress) for m in cfg.modes if m not in FACT_MODES}
        extraction = _fact_modes(ds, cfg, acfg, index, cache, modes, progress)
    finally:
        mem.close()
        cache.close()
    modes = {m: modes[m] for m in cfg.modes}  # in the order asked
    tokens = _token_report(modes, acfg, len(qids), full)
    return {
        "kind": "answers",
        "dataset": {
            "name": ds.name,
            "path": ds.path,
            "split": ds.split,
            "docs": len(ds.docs),
            "chunks": index.get("chunks"),
            "queries": len(qids),
            "questions_in_set": full,
            "adversarial_left_out": left_out,
            "categories": _category_counts(ds),
        },
        "embedder": embedder_name(cfg.embedder),
        "top_k": cfg.top_k,
        "answerer": acfg.answerer.name,
        "judge": acfg.judge.name,
        "index": {k: index[k] for k in ("cached", "key", "index_s", "embed_s", "path", "chunks") if k in index},
        "cache": str(cache.path),
        "modes": modes,
        "tokens": tokens,
        **({"extraction": extraction} if extraction else {}),
        "prices_date": PRICES_DATE,
        "comparisons": _comparisons(modes, cfg.seed),
        "notes": _notes(cfg, acfg, modes, tokens, left_out),
        "started": started,
        "took_s": round(time.perf_counter() - t0, 2),
        "hybridmem_version": __version__,
    }


def _fact_modes(
    ds: Dataset,
    cfg: EvalConfig,
    acfg: AnswerConfig,
    index: dict[str, Any],
    cache: CallCache,
    modes: dict[str, dict[str, Any]],
    progress: Progress | None,
) -> dict[str, Any] | None:
    """The fact modes asked for, on a copy of the index with facts extracted by the answering
    model (:mod:`.facts`); what extraction did and cost, or None when none was asked."""
    wanted = [m for m in cfg.modes if m in FACT_MODES]
    if not wanted:
        return None
    fmem, folder, info = build_facts(ds, cfg, index, acfg.answerer, cache, progress)
    try:
        for m in wanted:
            modes[m] = _run_mode(fmem, ds, m, cfg, acfg, cache, progress)
    finally:
        fmem.close()
        shutil.rmtree(folder, ignore_errors=True)
    info["cost_usd"] = call_cost(
        acfg.answerer.name, info["tokens"]["prompt_tokens"], info["tokens"]["completion_tokens"], acfg.prices
    )
    return info


def _category_counts(ds: Dataset) -> dict[str, int]:
    """Questions per category, in the order of LoCoMo's tables (single-hop first), then "all"."""
    order = ["single-hop", "multi-hop", "temporal", "open-domain", ADVERSARIAL]
    found = [ds.categories.get(q) for q in ds.queries]
    cats = sorted({c for c in found if c}, key=lambda c: (order.index(c) if c in order else len(order), c))
    return {"all": len(ds.queries), **{c: found.count(c) for c in cats}}


def _notes(
    cfg: EvalConfig, acfg: AnswerConfig, modes: dict[str, dict[str, Any]], tokens: dict[str, Any], left_out: int
) -> list[str]:
    notes = [
        f"J = share of answers the judge ({acfg.judge.name}) labelled CORRECT (Mem0's LLM-as-judge protocol); "
        f"answers by {acfg.answerer.name} from the top {cfg.top_k} retrieved turns (grounded-answer pipeline); "
        "F1 and BLEU-1 against the gold answer after LoCoMo's normalization, citations removed",
    ]
    if left_out:
        notes.append(
            f"{left_out} adversarial questions (category 5) left out, as Mem0's evaluation and the comparisons "
            "built on it do (--adversarial includes them)"
        )
    elif acfg.adversarial:
        notes.append(f'adversarial questions included, judged against "{NOT_MENTIONED}"')
    notes.append(
        f"{tokens['calls']} model calls made now, {tokens['cached']} answers and verdicts from the cache"
        + (" (a re-run costs nothing)" if not tokens["calls"] else "")
    )
    for mode, r in modes.items():
        if r["errors"]["answer"] or r["errors"]["judge"]:
            notes.append(
                f"{mode}: {r['errors']['answer']} answers failed (scored 0) and {r['errors']['judge']} verdicts "
                "failed (counted WRONG): see the per-question rows in results.json"
            )
    for mode, r in modes.items():
        if r.get("rerank_tokens"):
            rt = r["rerank_tokens"]
            notes.append(
                f"{mode}: the reranker made {rt['calls']} LLM calls ({rt['prompt_tokens']} prompt + "
                f"{rt['completion_tokens']} completion tokens), not cached and not in the totals"
            )
    for role in ROLES:
        if tokens[role]["unreported"]:
            notes.append(f"{role}: {tokens[role]['unreported']} calls reported no token counts (counted as 0)")
        if tokens[role]["cost_usd_all"] == "unknown":
            notes.append(f"{role}: no price for {tokens[role]['model']}: cost unknown (add it with --prices FILE.json)")
    if cfg.limit:
        notes.append(f"only the first {cfg.limit} questions were answered (--limit): not a publishable number")
    return notes
