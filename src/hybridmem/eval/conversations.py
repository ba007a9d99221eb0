"""Conversational evaluation sets, read natively: LoCoMo (Maharana et al., ACL 2024) in its original
JSON (a list of ``{sample_id, conversation: {speaker_a, speaker_b, session_N_date_time, session_N:
[{speaker, dia_id, text, blip_caption?}]}, qa: [{question, answer | adversarial_answer, evidence,
category}]}``).

Each turn is one memory, as ``Memory.add_messages`` stores a message: text ``Speaker: text`` (plus
the shared photo's caption), the turn before it as index-only context, metadata ``session_id`` (``{conversation}:S{n}``), ``turn``, ``speaker``,
``user_id`` (the conversation: the scope each of its questions searches in, as the benchmark
intends) and ``occurred_at`` the session's date-time (plus one second per turn, so turns keep their
order). The evidence turns are the judged documents; the gold answers are kept for the
answer-level evaluation (:mod:`hybridmem.eval.answers`). The loader repairs the data issues its README
lists (``"D8:6; D9:17"``, ``"D:11:26"``, ids naming no turn) and leaves out questions without evidence.

Questions that name a time ("… in May 2023", "… last week", resolved against the conversation's last
session) are tagged ``time-constrained`` (:attr:`Dataset.tags`), scored apart by the report.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from ..errors import NotFoundError, ValidationError
from ..timeexpr import find_time_expressions, parse_timestamp

__all__ = ["CATEGORIES", "is_locomo", "load_locomo"]

#: LoCoMo's category numbers (the mapping of its README: the paper's Table 5 counts)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")


def is_locomo(path: Path) -> bool:
    """A JSON file holding LoCoMo conversations."""
    if not path.is_file() or path.suffix != ".json":
        return False
    with path.open("rb") as f:
        head = f.read(4096)
    return b'"qa"' in head or b'"conversation"' in head or b'"sample_id"' in head


def _turns(conv_id: str, c: dict[str, Any]) -> tuple[list[dict[str, Any]], datetime]:
    docs: list[dict[str, Any]] = []
    last = datetime(1970, 1, 1, tzinfo=timezone.utc)
    n = 1
    while f"session_{n}" in c:
        when = parse_timestamp(c[f"session_{n}_date_time"], field=f"{conv_id}.session_{n}_date_time")
        previous = None
        for i, t in enumerate(c[f"session_{n}"]):
            text = f"{t['speaker']}: {t['text']}"
            if t.get("blip_caption"):
                text += f" [shares a photo: {t['blip_caption']}]"
            at = when + timedelta(seconds=i)
            docs.append(
                {
                    "id": f"{conv_id}:{t['dia_id']}",
                    "text": text,
                    "context": previous,  # the turn before, index-only, as Memory.add_messages stores it
                    "occurred_at": at.isoformat(),
                    "metadata": {
                        "user_id": conv_id,
                        "session_id": f"{conv_id}:S{n}",
                        "turn": i,
                        "speaker": t["speaker"],
                    },
                }
            )
            last = max(last, at)
            previous = text
        n += 1
    return docs, last


def _evidence(conv_id: str, raw: list[str], known: set[str]) -> list[str]:
    out = []
    for e in raw:
        for m in _EVIDENCE.finditer(str(e)):
            did = f"{conv_id}:D{int(m.group(1))}:{int(m.group(2))}"
            if did in known and did not in out:
                out.append(did)
    return out


def load_locomo(path: Path) -> dict[str, Any]:
    """The conversations of ``path``: the fields of one :class:`~hybridmem.eval.datasets.Dataset`."""
    try:
        raw = path.read_bytes()
        items = json.loads(raw)
    except (OSError, json.JSONDecodeError) as e:
        raise NotFoundError(f"{path}: not a readable LoCoMo JSON file ({e})") from None
    if not isinstance(items, list) or not all(isinstance(x, dict) and "conversation" in x for x in items):
        raise ValidationError(f"{path}: expected a list of LoCoMo conversations", field="dataset")
    docs: list[dict[str, Any]] = []
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    categories: dict[str, str] = {}
    scopes: dict[str, dict[str, Any]] = {}
    tags: dict[str, list[str]] = {}
    answers: dict[str, str] = {}
    for item in items:
        conv_id = str(item.get("sample_id") or f"conv-{len(scopes)}")
        turns, last = _turns(conv_id, item["conversation"])
        docs += turns
        known = {d["id"] for d in turns}
        for j, qa in enumerate(item.get("qa", [])):
            evidence = _evidence(conv_id, qa.get("evidence") or [], known)
            if not evidence:
                continue  # nothing to retrieve: left out of retrieval scores (the README's 2 questions)
            qid = f"{conv_id}:q{j}"
            queries[qid] = str(qa["question"])
            qrels[qid] = {d: 1 for d in evidence}
            categories[qid] = CATEGORIES.get(int(qa.get("category", 0)), str(qa.get("category")))
            scopes[qid] = {"user_id": conv_id}
            # an adversarial question (5) has only the trap answer ("adversarial_answer"): no gold
            answers[qid] = "" if int(qa.get("category", 0)) == 5 else str(qa.get("answer", ""))
            if find_time_expressions(queries[qid], last):
                tags[qid] = ["time-constrained"]
    return dict(
        name=path.stem,
        path=str(path),
        split="test",
        docs=docs,
        queries=queries,
        qrels=qrels,
        categories=categories,
        chunk_size=None,
        # of the documents as built (the loader's choices included), not only of the file
        fingerprint=hashlib.sha256(json.dumps(docs, sort_keys=True).encode()).hexdigest()[:16],
        scopes=scopes,
        tags=tags,
        answers=answers,
    )
