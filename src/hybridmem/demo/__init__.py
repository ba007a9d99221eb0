"""The shipped demo memory: technical docs of the fictional product Helio, with graded questions."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

__all__ = ["load_documents", "load_questions", "KEY_QUESTIONS"]

#: the two questions `hybridmem demo` runs in every mode: one won by BM25, one by vectors
KEY_QUESTIONS = ("q01", "q02")


def _jsonl(name: str) -> list[dict[str, Any]]:
    text = resources.files(__name__).joinpath(name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def load_documents() -> list[dict[str, Any]]:
    return _jsonl("documents.jsonl")


def load_questions() -> list[dict[str, Any]]:
    return _jsonl("questions.jsonl")
