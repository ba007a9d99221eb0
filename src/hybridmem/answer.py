"""Grounded answers: an LLM answers only from the retrieved chunks and cites them as
``[chunk_id]`` (citations checked, invented ones removed and flagged); offline, an extractive
answerer returns the best sentences of the top chunks with their ids, or says the answer is not there."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from .llm.base import ChatModel, Message
from .models import QueryResult, Usage
from .text.tokenize import detect_language, is_identifier, tokenize

__all__ = [
    "AnswerDraft",
    "llm_answer",
    "extractive_answer",
    "check_citations",
    "not_found_message",
    "answer_messages",
    "MAX_SENTENCES",
]

MAX_SENTENCES = 3
#: characters of each context chunk shown to the model
MAX_CONTEXT_CHARS = 1500
#: extractive relevance test: a chunk is usable when it holds an identifier the question cites, or
#: this share of the question's (weighted) content words. Measured on the demo set: see docs/llm.md
MIN_COVERAGE = 0.4
#: an identifier of the question weighs as much as this many plain words
IDENT_WEIGHT = 3.0
#: a heading names what follows rather than saying it, and a code line illustrates it: their
#: overlap counts this much
KIND_WEIGHT = {"heading": 0.5, "code": 0.5, "text": 1.0}
#: question words found only in a sentence's title or section heading count this much
CONTEXT_WEIGHT = 0.5
#: a sentence's overlap is divided by (1 + RANK_DECAY × chunk rank): retrieval, reranked, knows
#: better than word overlap which chunk answers, so a tie goes to the better-ranked chunk
RANK_DECAY = 0.25

_NOT_FOUND = {
    "en": "The answer is not in the memory: no retrieved passage matches this question.",
    "fr": "La réponse ne se trouve pas dans la mémoire : aucun passage retrouvé ne correspond à cette question.",
    "de": "Die Antwort steht nicht im Speicher: keine gefundene Passage passt zu dieser Frage.",
    "es": "La respuesta no está en la memoria: ningún pasaje recuperado corresponde a esta pregunta.",
    "zh": "记忆库中没有这个问题的答案：检索到的段落都与问题不符。",
}


@dataclass
class AnswerDraft:
    answer: str
    found: bool
    #: valid context chunk ids, in order of first citation
    cited: list[str]
    invented: list[str] = field(default_factory=list)
    answerer: str = "extractive"
    notes: list[str] = field(default_factory=list)
    usage: Usage | None = None


def question_language(question: str) -> str | None:
    """The stopword detector, then, for questions too short for it, telling characters."""
    lang = detect_language(question)
    if lang:
        return lang
    low = question.casefold()
    if any(c in low for c in "¿¡ñ"):
        return "es"
    if any(c in low for c in "äöüß"):
        return "de"
    if any(c in low for c in "éèêëçàâîïôûùœ") or re.search(r"\s[?!:;]\s*$", question):  # « ? » spacing is French
        return "fr"
    if any(c in low for c in "áíóú"):
        return "es"
    return None


def not_found_message(question: str) -> str:
    return _NOT_FOUND.get(question_language(question) or "en", _NOT_FOUND["en"])


# ---------------------------------------------------------------------------------- citations
_BRACKET = re.compile(r"([ \t]*)\[([^\[\]\n]{1,600})\]")
_SEP = re.compile(r"\s*[,;]\s*")


def _id_shaped(s: str) -> bool:
    return 0 < len(s) <= 512 and not any(c.isspace() for c in s)


def check_citations(
    text: str, listed: Sequence[str], results: Sequence[QueryResult]
) -> tuple[str, list[str], list[str]]:
    """Check every ``[id]`` of ``text`` (and the ids in ``listed``) against the context.

    Returns the text with invented citations removed, the valid chunk ids in order of first
    citation, and the invented ids. A document id of a context chunk counts as a citation of that
    chunk (rewritten to the chunk id); a bracket that holds no id-shaped text (``[sic]`` has one,
    ``[see below]`` has none) is left alone.
    """
    chunks = {r.chunk_id for r in results}
    first_of_doc: dict[str, str] = {}
    r: QueryResult | str | None  # a result, then the chunk id a listed id resolves to (if any)
    for r in results:
        first_of_doc.setdefault(r.doc_id, r.chunk_id)
    cited: dict[str, None] = {}
    invented: dict[str, None] = {}

    def resolve(token: str) -> str | None:
        t = token.strip().strip("`'\"")
        return t if t in chunks else first_of_doc.get(t)

    def sub(m: re.Match[str]) -> str:
        parts = [p for p in _SEP.split(m.group(2).strip()) if p]
        resolved = [resolve(p) for p in parts]
        if not any(resolved) and not all(_id_shaped(p) for p in parts):
            return m.group(0)
        keep: dict[str, None] = {}
        for p, r in zip(parts, resolved):
            if r is not None:
                keep.setdefault(r, None)
                cited.setdefault(r, None)
            else:
                invented.setdefault(p.strip(), None)
        # a citation removed whole takes its leading space along: "foo [bogus]." → "foo."
        return m.group(1) + "".join(f"[{k}]" for k in keep) if keep else ""

    clean = _BRACKET.sub(sub, text)
    for item in listed:
        r = resolve(str(item))
        if r is not None:
            cited.setdefault(r, None)
        elif str(item).strip():
            invented.setdefault(str(item).strip(), None)
    return clean.strip(), list(cited), list(invented)


# ---------------------------------------------------------------------------------- LLM
class GroundedAnswer(BaseModel):
    """What the model returns."""

    answer: str
    citations: list[str] = Field(default_factory=list)
    found: bool


_SYSTEM = (
    "You answer questions from an agent's memory. You use only the context chunks you are given, "
    "never outside knowledge, and you reply with a JSON object only."
)


def answer_messages(question: str, results: Sequence[QueryResult], max_chars: int = MAX_CONTEXT_CHARS) -> list[Message]:
    def clip(text: str) -> str:
        return text if len(text) <= max_chars else text[:max_chars].rstrip() + " …"

    context = "\n\n".join(_chunk_block(r, clip) for r in results) or "(no chunk retrieved)"
    user = (
        f"Context chunks, each introduced by its id in square brackets (and when it happened or was "
        f"said, if known):\n\n{context}\n\n"
        f"Question: {question}\n\n"
        "Rules:\n"
        "- For a question about when, answer with the time of the chunk that says it (a chunk's "
        "'yesterday' or 'last week' counts from that chunk's time).\n"
        f"- Answer in at most {MAX_SENTENCES} sentences, in the language of the question.\n"
        "- Use only the context chunks above. After each statement cite the chunk(s) it comes from as "
        "[chunk_id], with the ids exactly as written above; cite every chunk you use.\n"
        "- If the chunks do not contain the answer, say so plainly, cite nothing and set found to false.\n"
        'Reply with JSON: {"answer": "...", "citations": ["<chunk_id>", ...], "found": true or false}.'
    )
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


#: characters of one neighbouring turn shown around a hit (``context_window``)
MAX_TURN_CHARS = 500


def _chunk_block(r: QueryResult, clip: Callable[[str], str]) -> str:
    """One chunk of the prompt: ``[id] (time)``, its text, then the turns around it in its session
    (``context_window``) as reading context, not citable."""
    head = f"[{r.chunk_id}]" + (f" ({r.occurred_at})" if r.occurred_at else "")
    block = f"{head}\n{clip(r.text.strip())}"
    around = [c for c in r.context or [] if c.get("chunk_id") != r.chunk_id]
    if around:
        lines = []
        for c in around:
            text = str(c.get("text") or "").strip()
            text = text if len(text) <= MAX_TURN_CHARS else text[:MAX_TURN_CHARS].rstrip() + " …"
            when = f"({c['occurred_at']}) " if c.get("occurred_at") else ""
            mark = "before" if (c.get("turn") is not None and r.turn is not None and c["turn"] < r.turn) else "after"
            lines.append(f"  {mark}: {when}{text}")
        block += "\n  (turns around it in the conversation; cite the chunk above, not these)\n" + "\n".join(lines)
    return block


def llm_answer(question: str, results: Sequence[QueryResult], llm: ChatModel) -> AnswerDraft:
    """Raises LLMError (carrying the usage spent) when the model fails."""
    out = llm.complete(answer_messages(question, results), schema=GroundedAnswer, purpose="answer")
    data = out.data
    assert isinstance(data, GroundedAnswer)
    text, cited, invented = check_citations(data.answer, data.citations, results)
    notes = []
    if invented:
        notes.append(f"removed citation(s) of chunks not in the context: {', '.join(invented)}")
    if data.found and not cited:
        notes.append("the model answered without citing any chunk of the context: treat the answer as ungrounded")
    if not text.strip():
        text = not_found_message(question)
    return AnswerDraft(
        answer=text,
        found=data.found,
        cited=cited,
        invented=invented,
        answerer=f"llm:{llm.name}",
        notes=notes,
        usage=out.usage,
    )


# ---------------------------------------------------------------------------------- extractive
_LANGS = (None, "en", "fr", "de", "es")
_SPLIT = re.compile(r"[-_./:@#+]+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'«(\[`*]?[A-ZÀ-ÖØ-Þ0-9])|(?<=[。！？])")
_MD_PREFIX = re.compile(r"^\s*(?:#{1,6}\s+|>\s*|[-*+]\s+|\d{1,3}[.)]\s+)+")
_FENCE = re.compile(r"^\s*(```|~~~)")
MAX_SENTENCE_CHARS = 300


@dataclass
class _Word:
    forms: frozenset[str]
    weight: float


def _question_words(question: str) -> list[_Word]:
    """Distinct content words of the question, each with every form a chunk may index it under
    (as is, and stemmed in en/fr/de/es: tokenize stems token by token, so the streams align)."""
    streams = [tokenize(question, lang) for lang in _LANGS]
    idents = [t for t in streams[0] if is_identifier(t)]
    # the split parts of a cited identifier (hel, 4040) are not words of their own
    parts = {p for t in idents for p in _SPLIT.split(t)} - set(idents)
    words: dict[str, _Word] = {}
    for column in zip(*streams):
        base = column[0]
        if base in words or base in parts or len(base) < 2:
            continue
        words[base] = _Word(frozenset(column), IDENT_WEIGHT if is_identifier(base) else 1.0)
    return list(words.values())


def _blocks(text: str) -> list[tuple[str, str]]:
    """(block, kind) with kind ``heading``, ``code`` or ``text``: paragraphs with their hard-wrapped
    lines joined; list items and ``**Label:**`` lines on their own; markdown markers dropped."""
    out: list[tuple[str, str]] = []
    para: list[str] = []  # the open paragraph or list item: wrapped lines join it
    in_code = False

    def flush() -> None:
        if para:
            out.append((" ".join(para), "text"))
            para.clear()

    for i, raw in enumerate(text.strip().splitlines()):
        line = raw.strip()
        if _FENCE.match(line):
            flush()
            in_code = not in_code
            continue
        if not line or set(line) <= set("|-: "):
            flush()
            continue
        if in_code or line.startswith("|"):  # code and table rows: one line, one block
            flush()
            out.append((line, "code" if in_code else "text"))
            continue
        # a markdown heading, or the "Title › Section" breadcrumb the chunker puts on later chunks
        if line.startswith("#") or (i == 0 and " › " in line):
            flush()
            out.append((_MD_PREFIX.sub("", line).replace("**", "").strip(), "heading"))
            continue
        if _MD_PREFIX.match(line) or line.startswith("**"):
            flush()
            line = _MD_PREFIX.sub("", line)
        para.append(line.replace("**", ""))
    flush()
    return [(b, k) for b, k in out if b]


def _sentences(text: str) -> list[tuple[str, str, str]]:
    """(sentence, kind, headings) in order; ``headings`` = the chunk's title and the sentence's
    section heading: what the sentence is about even when it does not repeat it."""
    out: list[tuple[str, str, str]] = []
    title = section = ""
    for block, kind in _blocks(text):
        if kind == "heading":
            title, section = (title or block), block
        for s in _SENTENCE_END.split(block) if kind != "code" else [block]:
            s = s.strip()
            if s:
                out.append(
                    (
                        s if len(s) <= MAX_SENTENCE_CHARS else s[:MAX_SENTENCE_CHARS].rsplit(" ", 1)[0] + " …",
                        kind,
                        f"{title} {section}",
                    )
                )
    return out


def _matched(words: list[_Word], tokens: set[str]) -> float:
    return sum(w.weight for w in words if w.forms & tokens)


def extractive_answer(
    question: str,
    results: Sequence[QueryResult],
    *,
    max_sentences: int = MAX_SENTENCES,
    min_coverage: float = MIN_COVERAGE,
) -> AnswerDraft:
    """The best sentences of the usable chunks (by weighted overlap with the question's words),
    in reading order, each followed by its ``[chunk_id]``; "not found" when no chunk is usable."""
    words = _question_words(question)
    total = sum(w.weight for w in words)
    idents = [w for w in words if w.weight == IDENT_WEIGHT]
    scored: list[tuple[float, int, int, str, str]] = []  # (-score, chunk rank, position, sentence, chunk id)
    for rank, r in enumerate(results):
        lang = r.metadata.get("lang") if r.metadata.get("lang") in ("en", "fr", "de", "es", "zh") else "auto"
        chunk_tokens = set(tokenize(r.text, lang))
        usable = (idents and any(w.forms & chunk_tokens for w in idents)) or (
            total > 0 and _matched(words, chunk_tokens) / total >= min_coverage
        )
        if not usable:
            continue
        for pos, (sentence, kind, headings) in enumerate(_sentences(r.text)):
            own = set(tokenize(sentence, lang))
            hit = _matched(words, own)
            if hit == 0:
                continue
            context = _matched([w for w in words if not w.forms & own], set(tokenize(headings, lang)))
            score = (hit + CONTEXT_WEIGHT * context) * KIND_WEIGHT[kind] / (1 + RANK_DECAY * rank)
            scored.append((-score, rank, pos, sentence, r.chunk_id))
    if not scored:
        return AnswerDraft(answer=not_found_message(question), found=False, cited=[])
    scored.sort()
    picked: list[tuple[float, int, int, str, str]] = []
    seen: set[str] = set()
    for item in scored:
        key = " ".join(item[3].split(" › ")[0].casefold().split())  # a breadcrumb repeats its title
        if key in seen:
            continue
        seen.add(key)
        picked.append(item)
        if len(picked) == max_sentences:
            break
    picked.sort(key=lambda x: (x[1], x[2]))  # reading order: chunk rank, then position in the chunk
    parts = []
    for _, _, _, sentence, chunk_id in picked:
        end = "" if sentence.endswith((".", "!", "?", "。", "！", "？", "…")) else "."
        parts.append(f"{sentence}{end} [{chunk_id}]")
    cited = list(dict.fromkeys(p[4] for p in picked))
    return AnswerDraft(answer=" ".join(parts), found=True, cited=cited)
