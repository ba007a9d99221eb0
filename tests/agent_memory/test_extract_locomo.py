"""Extraction over a real conversation (issue 46): the first 30 turns of LoCoMo's conv-26 (its
first session and the start of the second, ``../shared/data/agentmem/``) with scripted model
answers that name the real turns. Checked: provenance (each fact's source turns are LoCoMo's
evidence turns of the question it answers), times resolved from the turns' words against the
session's date ("yesterday", "last year", "next month"), keys, supersession (by a key, and by the
conflict check's UPDATE) with the history keeping the old version, and the turns all stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from test_extract import Router, _fact, _facts, _memory, _verdict

from conftest import shared_path

#: what the scripted model proposes for each batch, by the batch's first turn
PROPOSALS: dict[str, list[dict[str, Any]]] = {
    "D1:1": [
        _fact("Caroline went to an LGBTQ support group.", ["D1:3"], when="yesterday"),
        _fact("Caroline plans to continue her education and look at career options.", ["D1:9"], key="caroline.career"),
        _fact("Caroline said she is from Mars.", ["D9:99"]),  # an invented turn: dropped
    ],
    "D1:11": [
        _fact("Caroline wants to work in counseling or mental health.", ["D1:9", "D1:11"], key="caroline.career"),
        # D1:9 is a turn of the previous batch: dropped from this fact's sources (its version has it)
        _fact("Melanie painted a lake sunrise.", ["D1:12", "D1:14"], when="last year"),
    ],
    "D2:1": [
        _fact("Melanie ran a charity race for mental health.", ["D2:1"], when="last Saturday"),
        _fact("Melanie's family plans to go camping.", ["D2:7"], when="next month"),
        _fact("Caroline is researching adoption agencies.", ["D2:8"]),
    ],
    "D2:11": [_fact("Caroline chose an adoption agency that helps LGBTQ+ people adopt.", ["D2:12"])],
}


def _conversation(turns: int) -> tuple[list[tuple[str, list[dict[str, Any]]]], list[dict[str, Any]]]:
    """The first ``turns`` turns of conv-26 as chat messages, by session; and its questions."""
    data = json.loads(Path(shared_path("data", "agentmem", "locomo", "locomo-shared.json")).read_text())
    conv = next(c for c in data if c["sample_id"] == "conv-26")
    sessions, left = [], turns
    for n in (1, 2):
        c = conv["conversation"]
        when = c[f"session_{n}_date_time"]
        msgs = [
            {"role": "user", "name": t["speaker"], "content": t["text"], "timestamp": when, "id": t["dia_id"]}
            for t in c[f"session_{n}"][:left]
        ]
        sessions.append((f"conv-26:s{n}", msgs))
        left -= len(msgs)
    return sessions, conv["qa"]


def _extract(prompt: str) -> str:
    first = prompt.split("NEW TURNS:\n[", 1)[1].split("]", 1)[0]
    return _facts(*PROPOSALS[first])


def _check(existing: list[dict], new: str) -> str:
    target = next((c["id"] for c in existing if "researching adoption" in c["text"]), None)
    if target is not None and "chose an adoption agency" in new:
        return _verdict("UPDATE", target, new, "she has chosen an agency now")
    return _verdict("ADD", reason="new")


def test_facts_from_a_real_locomo_conversation(tmp_path: Path) -> None:
    sessions, qa = _conversation(30)
    router = Router(_extract, _check)
    m, _ = _memory(tmp_path / "locomo.db", router)
    with m:
        reports = [
            m.add_messages(msgs, session_id=sid, user_id="conv-26", extract=True, extract_batch=10)
            for sid, msgs in sessions
        ]
        assert sum(len(r.added) for r in reports) == 30  # every turn stored, facts or not
        batches = [b for r in reports for b in (r.extraction.batches if r.extraction else [])]
        assert [b.turns[0] for b in batches] == list(PROPOSALS) and all(b.status == "done" for b in batches)
        facts = {f.text: f for b in batches for f in b.facts}
        assert "Caroline said she is from Mars." not in facts and batches[0].dropped[0].text.endswith("Mars.")
        for b in batches:  # provenance: each fact's turns are turns of its batch
            assert all(set(f.source_turns) <= set(b.turns) for f in b.facts)

        # provenance meets LoCoMo's evidence, and the times its gold answers give
        def answers(question: str) -> tuple[Any, list[str]]:
            q = next(q for q in qa if q["question"] == question)
            return q["answer"], q["evidence"]

        group = facts["Caroline went to an LGBTQ support group."]
        assert answers("When did Caroline go to the LGBTQ support group?") == ("7 May 2023", group.source_turns)
        assert group.occurred_at == "2023-05-07T00:00:00.000Z" and group.occurred_text == "yesterday"
        painted = facts["Melanie painted a lake sunrise."]
        gold, evidence = answers("When did Melanie paint a sunrise?")
        assert (
            gold == 2022 and painted.occurred_at == "2022-01-01T00:00:00.000Z" and evidence[0] in painted.source_turns
        )
        camping = facts["Melanie's family plans to go camping."]
        assert answers("When is Melanie planning on going camping?") == ("June 2023", camping.source_turns)
        assert camping.occurred_at == "2023-06-01T00:00:00.000Z"
        assert facts["Melanie ran a charity race for mental health."].occurred_at == "2023-05-20T00:00:00.000Z"

        # a key: the later career fact supersedes the earlier one, whose version stays in the history
        career = facts["Caroline wants to work in counseling or mental health."]
        first = facts["Caroline plans to continue her education and look at career options."]
        assert (career.event, career.id, career.decided_by) == ("UPDATE", first.id, "rule") and career.key == first.key
        versions = m.history(career.id)
        assert [v["current"] for v in versions] == [False, True]
        assert versions[0]["metadata"]["source_turns"] == ["D1:9"] and "education" in versions[0]["text"]
        assert versions[1]["reason"].endswith("; from turns D1:11") and "counseling" in versions[1]["text"]
        _, evidence = answers("What fields would Caroline be likely to pursue in her educaton?")
        assert sorted(evidence) == sorted(t for v in versions for t in v["metadata"]["source_turns"])

        # the conflict check: choosing an agency updates "researching adoption agencies"
        chose = facts["Caroline chose an adoption agency that helps LGBTQ+ people adopt."]
        research = facts["Caroline is researching adoption agencies."]
        assert (chose.event, chose.id, chose.decided_by) == ("UPDATE", research.id, "scripted:test")
        assert research.id in chose.candidates
        history = m.history(research.id)
        assert [v["metadata"]["source_turns"] for v in history] == [["D2:8"], ["D2:12"]]
        assert history[1]["reason"] == "UPDATE (scripted:test): she has chosen an agency now; from turns D2:12"
        assert answers("What did Caroline research?")[1] == history[0]["metadata"]["source_turns"]

        # the known facts of the scope were shown with the later turns, and searches tell facts from turns
        assert "caroline.career" in router.prompts[2] and "LGBTQ support group" in router.prompts[2]
        hits = m.search({"search_text": "adoption agency", "top_k": 20, "mode": "bm25", "user_id": "conv-26"}).results
        kinds = {h.doc_id: h.kind for h in hits}
        assert kinds[research.id] == "fact" and kinds["D2:8"] == "turn"
        current = [h.text for h in hits if h.kind == "fact"]
        assert "Caroline is researching adoption agencies." not in current
        total = sum((r.extraction.usage.calls if r.extraction else 0) for r in reports)
        assert total == len(PROPOSALS) + len(router.checks)  # one extraction call per batch, one per check
