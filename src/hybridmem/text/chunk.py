"""Markdown-aware chunking: headings, paragraphs and fenced code blocks kept whole where possible.

Blocks are packed greedily up to ``size`` characters; a heading is never left at the end of a chunk;
a chunk that starts inside a section is prefixed with that section's heading path, so both legs
see its context; consecutive prose chunks overlap by whole sentences (up to ``overlap`` characters).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["chunk_text", "Block"]

_FENCE = re.compile(r"^(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*\S)\s*$")
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+|(?<=[。！？])")


@dataclass
class Block:
    text: str
    kind: str  # "heading" | "code" | "para"
    level: int = 0


def _blocks(text: str) -> list[Block]:
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out: list[Block] = []
    para: list[str] = []

    def flush() -> None:
        if para and any(p.strip() for p in para):
            out.append(Block("\n".join(para).strip("\n"), "para"))
        para.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line.strip())
        if fence:
            flush()
            marker, code = fence.group(1), [line]
            i += 1
            while i < len(lines):
                code.append(lines[i])
                if lines[i].strip().startswith(marker):
                    break
                i += 1
            out.append(Block("\n".join(code), "code"))
        elif (h := _HEADING.match(line)) is not None:
            flush()
            out.append(Block(line.strip(), "heading", len(h.group(1))))
        elif not line.strip():
            flush()
        else:
            para.append(line)
        i += 1
    flush()
    return out


def _split_long(text: str, size: int) -> list[str]:
    """Split an oversized block by sentences, then by words, then hard."""
    pieces: list[str] = []
    cur = ""
    for sent in (s for s in _SENTENCE.split(text) if s):
        while len(sent) > size:
            cut = sent.rfind(" ", 0, size)
            cut = cut if cut > size // 2 else size
            if cur:
                pieces.append(cur)
                cur = ""
            pieces.append(sent[:cut].strip())
            sent = sent[cut:].strip()
        if cur and len(cur) + 1 + len(sent) > size:
            pieces.append(cur)
            cur = sent
        else:
            cur = f"{cur} {sent}" if cur else sent
    if cur:
        pieces.append(cur)
    return [p for p in pieces if p.strip()]


def _tail_sentences(text: str, overlap: int) -> str:
    if overlap <= 0:
        return ""
    sents = [s for s in _SENTENCE.split(text) if s.strip()]
    tail: list[str] = []
    total = 0
    for s in reversed(sents):
        if total + len(s) > overlap:
            break
        tail.insert(0, s)
        total += len(s) + 1
    return " ".join(tail)


def chunk_text(text: str, size: int | None = 1200, overlap: int = 150) -> list[str]:
    """Chunks of ``text``; ``size`` None or 0 keeps the text whole (one chunk)."""
    if not text.strip():
        return []
    if not size or len(text) <= size:
        return [text.strip()]
    overlap = max(0, min(overlap, size // 2))
    headings: dict[int, str] = {}
    chunks: list[str] = []
    cur: list[Block] = []  # blocks of the chunk being built
    carried = 0  # how many leading blocks of ``cur`` are overlap from the previous chunk
    context = ""  # heading path shown at the top of a chunk that starts inside a section

    def length() -> int:
        return len(context) + sum(len(b.text) + 2 for b in cur)

    def emit(keep_overlap: bool) -> None:
        nonlocal cur, carried, context
        body = "\n\n".join(b.text for b in cur).strip()
        if context and cur[0].kind != "heading":
            body = f"{context}\n\n{body}"
        chunks.append(body)
        last = cur[-1]
        cur, carried = [], 0
        if keep_overlap and last.kind == "para":
            tail = _tail_sentences(last.text, overlap)
            if tail and tail != last.text:
                cur, carried = [Block(tail, "para")], 1

    def crumb() -> str:
        return " › ".join(headings[lv].lstrip("#").strip() for lv in sorted(headings))

    pending: list[Block] = []  # headings waiting for the block they introduce
    for blk in _blocks(text):
        if blk.kind == "heading":
            for lv in [lv for lv in headings if lv >= blk.level]:
                del headings[lv]
            headings[blk.level] = blk.text
            pending.append(blk)
            continue
        room = max(size - overlap - len(crumb()) - 4, size // 2)  # leave space for overlap and context
        if blk.kind == "code":  # a fenced block that fits in a chunk is never cut: it starts a chunk instead
            room = max(room, size - len(crumb()) - 4)
        parts = [blk] if len(blk.text) <= room else [Block(p, blk.kind) for p in _split_long(blk.text, room)]
        for part in parts:
            group = pending + [part]
            glen = sum(len(b.text) + 2 for b in group)
            if len(cur) > carried and length() + glen > size:
                emit(keep_overlap=not pending)  # a new section starts clean
                context = "" if pending else crumb()
            if part.kind == "code" and carried and len(cur) == carried and length() + glen > size:
                cur, carried = [], 0  # no room left for the overlap in front of the code block
            if not cur and not pending:
                context = crumb()
            cur.extend(group)
            pending = []
    if len(cur) > carried:
        emit(keep_overlap=False)
    return chunks
