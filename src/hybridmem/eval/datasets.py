"""Evaluation datasets: a BEIR-layout folder or the shipped demo question set.

BEIR layout: ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id``, ``text``),
``qrels/<split>.tsv`` (``query-id``, ``corpus-id``, ``score``, header line). Optional
``categories.tsv`` (``query-id``, ``category``) in ``qrels/`` or beside it gives query categories;
without it every query is in one category. Documents are indexed whole, ``title\\n\\ntext``, as BEIR
scores them; the demo set is chunked as the demo ingests it and judged at document level.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import config
from ..errors import NotFoundError, ValidationError
from .conversations import is_locomo, load_locomo

__all__ = ["DEMO", "Dataset", "load_dataset"]

DEMO = "demo"


@dataclass
class Dataset:
    name: str
    path: str
    split: str
    docs: list[dict[str, Any]]
    queries: dict[str, str]  # judged queries of the split only
    qrels: dict[str, dict[str, int]]
    categories: dict[str, str] = field(default_factory=dict)
    filters: dict[str, dict[str, Any]] = field(default_factory=dict)
    languages: dict[str, str] = field(default_factory=dict)
    chunk_size: int | None = None
    splits: tuple[str, ...] = ()
    fingerprint: str = ""
    #: request fields a query searches within (a conversational set: its conversation, ``user_id``)
    scopes: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: extra labels of a query, scored apart (``time-constrained``)
    tags: dict[str, list[str]] = field(default_factory=dict)
    #: a question's gold answer (LoCoMo; an adversarial question's is empty: it has none to say)
    answers: dict[str, str] = field(default_factory=dict)

    def subset(self, qids: list[str], split: str) -> Dataset:
        """The same corpus with only ``qids`` as queries (for tune / report halves)."""
        return Dataset(
            self.name,
            self.path,
            split,
            self.docs,
            {q: self.queries[q] for q in qids},
            {q: self.qrels[q] for q in qids},
            {q: c for q, c in self.categories.items() if q in qids},
            {q: f for q, f in self.filters.items() if q in qids},
            {q: lang for q, lang in self.languages.items() if q in qids},
            self.chunk_size,
            self.splits,
            self.fingerprint,
            {q: s for q, s in self.scopes.items() if q in qids},
            {q: t for q, t in self.tags.items() if q in qids},
            {q: a for q, a in self.answers.items() if q in qids},
        )


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ValidationError(f"{path}:{n}: not valid JSON ({e.msg})", field="dataset") from e
    return out


def _read_tsv(path: Path) -> list[list[str]]:
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) >= 2 and parts[0]:
                rows.append(parts)
    if rows and rows[0][0].lower() in ("query-id", "query_id", "qid", "query"):
        rows = rows[1:]
    return rows


def _fingerprint(*parts: bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(hashlib.sha256(p).digest())
    return h.hexdigest()


def load_dataset(spec: str, split: str = "test") -> Dataset:
    """``demo`` (the shipped Helio set) or a BEIR-layout folder."""
    if spec == DEMO:
        return _load_demo()
    root = Path(spec)
    if not root.exists():
        raise NotFoundError(f"dataset not found: {spec} (a BEIR folder, a LoCoMo JSON file or 'demo')")
    if is_locomo(root):
        return Dataset(**load_locomo(root))
    for need in ("corpus.jsonl", "queries.jsonl"):
        if not (root / need).is_file():
            raise NotFoundError(f"{root} is not a BEIR-layout dataset: {need} is missing")
    splits = tuple(sorted(p.stem for p in (root / "qrels").glob("*.tsv") if p.stem != "categories"))
    qrels_path = root / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        raise NotFoundError(f"{root}: no qrels for split {split!r} (have: {', '.join(splits) or 'none'})")
    corpus_bytes = (root / "corpus.jsonl").read_bytes()
    docs = []
    for rec in _read_jsonl(root / "corpus.jsonl"):
        title = (rec.get("title") or "").strip()
        docs.append({"id": str(rec["_id"]), "text": f"{title}\n\n{rec['text']}" if title else rec["text"]})
    all_queries = {str(q["_id"]): q["text"] for q in _read_jsonl(root / "queries.jsonl")}
    qrels: dict[str, dict[str, int]] = {}
    for row in _read_tsv(qrels_path):
        qid, did, score = row[0], row[1], int(row[2]) if len(row) > 2 else 1
        if score > 0:
            qrels.setdefault(qid, {})[did] = score
    qrels = {q: r for q, r in qrels.items() if q in all_queries}
    categories: dict[str, str] = {}
    for cpath in (root / "qrels" / "categories.tsv", root / "categories.tsv"):
        if cpath.is_file():
            categories = {r[0]: r[1] for r in _read_tsv(cpath) if r[0] in qrels}
            break
    return Dataset(
        root.name,
        str(root),
        split,
        docs,
        {q: all_queries[q] for q in qrels},
        qrels,
        categories,
        chunk_size=None,
        splits=splits,
        fingerprint=_fingerprint(corpus_bytes),
    )


def _load_demo() -> Dataset:
    from ..demo import load_documents, load_questions

    docs = load_documents()
    questions = load_questions()
    qrels = {q["id"]: {g: 1 for g in q["gold"]} for q in questions}
    return Dataset(
        DEMO,
        "hybridmem.demo",
        "all",
        docs,
        {q["id"]: q["question"] for q in questions},
        qrels,
        categories={q["id"]: q["category"] for q in questions if q.get("category")},
        filters={q["id"]: q["metadata_filter"] for q in questions if q.get("metadata_filter")},
        languages={q["id"]: q["lang"] for q in questions if q.get("lang")},
        chunk_size=config.DEFAULT_CHUNK_SIZE,
        splits=("all",),
        fingerprint=_fingerprint(json.dumps(docs, sort_keys=True, ensure_ascii=False).encode()),
    )
