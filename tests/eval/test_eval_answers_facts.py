"""Extracted facts as answer-level modes (``facts``, ``facts+turns``) on a real LoCoMo conversation
with scripted models: the answering model extracts a fact from each turn of every session, each
fact goes through the conflict check; the fact modes search a copy of the index (the turn modes'
index is left as it was), a fact stands for its source turns in the evidence recall, extraction's
calls and tokens are reported, and a re-run makes no model call at all."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from test_eval_answers import LIMIT, locomo_slice, scripted_answerer, scripted_judge  # noqa: F401

from hybridmem.eval.answers import AnswerConfig, run_answer_eval
from hybridmem.eval.datasets import load_dataset
from hybridmem.eval.modes import EvalConfig
from llm_fakes import ScriptedChatModel

_TURN = re.compile(r"^\[([^\]\n]+)\](?: \([^)]*\))? (.*)$", re.M)


def extracting(answer: Any, counts: dict[str, int]) -> Any:
    """The answering model, also extracting: a fact from each new turn (its text, its id as the
    source), ADD for every conflict check; the answers as ``answer`` gives them."""

    def reply(messages: list[Any]) -> str:
        prompt = messages[-1]["content"]
        if "NEW TURNS:" in prompt:
            counts["extract"] = counts.get("extract", 0) + 1
            turns = _TURN.findall(prompt.split("NEW TURNS:", 1)[1])
            return json.dumps({"facts": [{"text": f"Fact: {text}", "source_turns": [tid]} for tid, text in turns]})
        if prompt.startswith("EXISTING:"):
            counts["check"] = counts.get("check", 0) + 1
            return json.dumps({"event": "ADD", "target_id": None, "reason": "new"})
        return answer(messages)

    return reply


def test_fact_modes_extract_search_facts_and_rerun_from_the_cache(locomo_slice: Path, tmp_path: Path) -> None:  # noqa: F811
    ds = load_dataset(str(locomo_slice))
    qids = [q for q in ds.queries if ds.categories[q] != "adversarial"][:LIMIT]
    right = {ds.queries[q] for q in qids[::2]}
    counts: dict[str, int] = {}
    answerer = ScriptedChatModel([extracting(scripted_answerer(ds, right, []), counts)] * 5000)
    judge = ScriptedChatModel([scripted_judge([])] * 1000)
    judge.name = "scripted:judge"
    cfg = EvalConfig(modes=("hybrid", "facts", "facts+turns"), embedder="hash", cache_dir=tmp_path / "c", limit=LIMIT)
    res = run_answer_eval(ds, cfg, AnswerConfig(answerer=answerer, judge=judge, concurrency=1))

    assert list(res["modes"]) == ["hybrid", "facts", "facts+turns"]
    ext = res["extraction"]
    sessions = {d["metadata"]["session_id"] for d in ds.docs}
    assert ext["sessions"] == len(sessions) and ext["batches_pending"] == 0
    assert ext["facts_stored"] == len(ds.docs) == ext["events"]["ADD"]  # one fact a turn, each added
    assert ext["tokens"]["calls"] == counts["extract"] + counts["check"]
    facts = res["modes"]["facts"]
    for qid in qids:
        got = facts["answers"][qid]["retrieved"]
        assert got and all(c.startswith("fact-") for c in got)  # facts only, never a turn
    # a fact stands for its turn: the evidence recall of facts is that of searching the turns' text
    assert facts["metrics"]["all"]["recall@10"] > 0
    assert facts["metrics"]["all"]["j"] == res["modes"]["hybrid"]["metrics"]["all"]["j"] == len(right) / LIMIT
    mixed = {c for q in qids for c in res["modes"]["facts+turns"]["answers"][q]["retrieved"]}
    assert any(c.startswith("fact-") for c in mixed) and any(c.startswith("conv-26:") for c in mixed)
    # the turn modes' index is untouched: hybrid still finds turns only
    assert all(c.startswith("conv-26:") for q in qids for c in res["modes"]["hybrid"]["answers"][q]["retrieved"])
    answerer2 = ScriptedChatModel([RuntimeError("called despite the cache")] * 10)
    judge2 = ScriptedChatModel([RuntimeError("called despite the cache")] * 10)
    judge2.name = "scripted:judge"
    again = run_answer_eval(ds, cfg, AnswerConfig(answerer=answerer2, judge=judge2, concurrency=1))
    assert answerer2.seen == [] and judge2.seen == []
    assert again["extraction"]["tokens"]["calls"] == 0 and again["extraction"]["facts_stored"] == ext["facts_stored"]
    assert again["modes"]["facts"]["metrics"] == facts["metrics"]
    assert not list((tmp_path / "c").glob(".*-facts-*"))  # the copy is removed after the run
