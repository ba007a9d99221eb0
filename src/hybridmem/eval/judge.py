"""Scoring a generated answer against LoCoMo's gold answer: the LLM judge (CORRECT / WRONG) and
the two lexical scores published LoCoMo comparisons report beside it, token F1 and BLEU-1.

The judge follows the protocol of the Mem0 paper (Chhikara et al., 2025, arXiv:2504.19413; its
``evaluation/metrics/llm_judge.py``), which Zep, LangMem, Memobase and later write-ups reuse: the
judge sees the question, the gold answer and the generated answer, is told to be generous about
wording, length and date formats as long as the answer is about the same thing (the same date or
period for a time question), and says CORRECT or WRONG. Mem0 asked for ``{"label": …}`` in JSON
mode after a one-sentence explanation; here the explanation and the label are one structured
output, ``{"reasoning", "label"}``, so every provider's schema support applies and a reply that
does not parse gets the LLM layer's one repair attempt. The prompt's wording is Mem0's (Apache-2.0),
kept so that J scores stay comparable; only the reply format line differs.

Lexical scores use LoCoMo's answer normalization (its ``task_eval/evaluation.py``, the SQuAD
one): lowercase, punctuation removed, the articles a / an / the removed, whitespace collapsed. F1
is over token multisets; BLEU-1 is the clipped unigram precision times the brevity penalty
``exp(1 - r / c)`` when the candidate (c tokens) is shorter than the reference (r tokens). No
stemming (LoCoMo's own F1 stems with Porter; Mem0's does not).
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from ..llm.base import Message

__all__ = ["JUDGE_PROMPT", "NOT_MENTIONED", "Verdict", "bleu1", "judge_messages", "normalize_answer", "token_f1"]

#: the gold answer of an adversarial question (LoCoMo category 5) when they are included: it asks
#: about something never said, so the right answer is that the conversation does not say
NOT_MENTIONED = "Not mentioned in the conversation"

JUDGE_PROMPT = """\
Your task is to label an answer to a question as 'CORRECT' or 'WRONG'. You will be given the following data:
    (1) a question (posed by one user to another user),
    (2) a 'gold' (ground truth) answer,
    (3) a generated answer
which you will score as CORRECT/WRONG.

The point of the question is to ask about something one user should know about the other user based on their \
prior conversations.
The gold answer will usually be a concise and short answer that includes the referenced topic, for example:
Question: Do you remember what I got the last time I went to Hawaii?
Gold answer: A shell necklace
The generated answer might be much longer, but you should be generous with your grading - as long as it touches \
on the same topic as the gold answer, it should be counted as CORRECT.

For time related questions, the gold answer will be a specific date, month, year, etc. The generated answer \
might be much longer or use relative time references (like "last Tuesday" or "next month"), but you should be \
generous with your grading - as long as it refers to the same date or time period as the gold answer, it should \
be counted as CORRECT. Even if the format differs (e.g., "May 7th" vs "7 May"), consider it CORRECT if it's the \
same date.

Now it's time for the real question:
Question: {question}
Gold answer: {gold_answer}
Generated answer: {generated_answer}

First, provide a short (one sentence) explanation of your reasoning, then finish with CORRECT or WRONG.
Do NOT include both CORRECT and WRONG in your label.

Reply with a JSON object only: {{"reasoning": "<one sentence>", "label": "CORRECT" or "WRONG"}}.
"""


class Verdict(BaseModel):
    """What the judge returns."""

    reasoning: str = Field(description="A short (one sentence) explanation of the judgment")
    label: Literal["CORRECT", "WRONG"] = Field(description="CORRECT or WRONG")

    @field_validator("label", mode="before")
    @classmethod
    def _label(cls, v: object) -> object:
        # "correct", " CORRECT." and the like are the label; anything else fails validation (repair)
        if isinstance(v, str):
            word = v.strip().strip(".!\"'").upper()
            if word in ("CORRECT", "WRONG"):
                return word
        return v


def judge_messages(question: str, gold: str, generated: str) -> list[Message]:
    """The judge's one user message (as Mem0 sends it: no system message)."""
    return [
        {
            "role": "user",
            "content": JUDGE_PROMPT.format(question=question, gold_answer=gold, generated_answer=generated),
        }
    ]


# ------------------------------------------------------------------------------ lexical scores
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation + "‘’“”–—…")


def normalize_answer(text: str) -> str:
    """Lowercase, punctuation and the articles a / an / the removed, whitespace collapsed."""
    s = str(text).lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", s).split())


def _tokens(text: str) -> list[str]:
    return normalize_answer(text).split()


def token_f1(prediction: str, gold: str) -> float:
    """Harmonic mean of token precision and recall over the normalized answers' token multisets;
    0 when either is empty (after normalization)."""
    pred, ref = _tokens(prediction), _tokens(gold)
    if not pred or not ref:
        return 0.0
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def bleu1(prediction: str, gold: str) -> float:
    """Sentence BLEU with unigrams only: clipped unigram precision × brevity penalty
    (``exp(1 - r/c)`` when the candidate's c tokens are fewer than the reference's r, else 1)."""
    pred, ref = _tokens(prediction), _tokens(gold)
    if not pred or not ref:
        return 0.0
    clipped = sum((Counter(pred) & Counter(ref)).values())
    precision = clipped / len(pred)
    bp = 1.0 if len(pred) >= len(ref) else math.exp(1 - len(ref) / len(pred))
    return bp * precision
