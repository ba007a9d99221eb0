"""Turn files, directories, JSON records and stdin into :class:`~hybridmem.models.Document` objects.

Binary or undecodable files are skipped with the reason, named by their path; the rest goes on.
Ids and sources are relative to the ingest base (:func:`ingest_base`), so they do not depend on how
the path was typed.
"""

from __future__ import annotations

import html.parser
import json
import logging
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import config
from ..errors import IngestError, NotFoundError
from ..models import Document

__all__ = [
    "load_path",
    "iter_files",
    "decode_file",
    "common_base",
    "ingest_base",
    "records_to_documents",
    "TEXT_SUFFIXES",
    "Skipped",
    "Loaded",
]

log = logging.getLogger(__name__)

TEXT_SUFFIXES = {".md", ".markdown", ".txt", ".rst", ".html", ".htm", ".json", ".jsonl"}


@dataclass
class Skipped:
    path: str
    reason: str


def iter_files(path: Path) -> Iterator[Path]:
    """Files under ``path`` with a supported suffix, sorted, hidden entries skipped."""
    yield from _walk(path)[0]


def _walk(path: Path) -> tuple[list[Path], list[Path]]:
    """The files at ``path`` (itself, or those under it, sorted, hidden entries skipped): those of
    a supported suffix, and the others (left out)."""
    if not path.exists():
        raise NotFoundError(f"no such file or directory: {path}")
    if path.is_file():
        return [path], []
    taken: list[Path] = []
    other: list[Path] = []
    for p in sorted(path.rglob("*")):
        if any(part.startswith(".") for part in p.relative_to(path).parts) or not p.is_file():
            continue
        (taken if p.suffix.lower() in TEXT_SUFFIXES else other).append(p)
    return taken, other


#: encodings preferred when charset-normalizer finds several equally good (single-byte codecs often
#: tie on Western text: cp1250 and cp1252 both decode "café" without a flaw, but only one is right)
_PREFERRED = ("utf_8", "cp1252", "latin_1", "iso8859_15", "gb18030", "big5", "shift_jis", "euc_jp", "cp1251")
_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
)


def _detect(raw: bytes, path: Path) -> tuple[str, str]:
    """Text and encoding of bytes that are not UTF-8, when charset-normalizer is confident enough."""
    from charset_normalizer import from_bytes  # noqa: PLC0415 - only files that are not UTF-8 need it

    matches = list(from_bytes(raw))
    if not matches:
        raise IngestError(f"{path}: not text in any known encoding (pass --encoding to force one)")
    least = min(m.chaos for m in matches)
    best_coherence = max(m.coherence for m in matches if m.chaos <= least + 0.01)
    tied = [m for m in matches if m.chaos <= least + 0.01 and m.coherence >= best_coherence - 0.02]
    rank = {e: i for i, e in enumerate(_PREFERRED)}

    def name(m: Any) -> str:  # a match stands for every encoding that decodes the bytes the same way
        return min([m.encoding, *m.could_be_from_charset], key=lambda e: rank.get(e, len(rank)))

    best = min(tied, key=lambda m: rank.get(name(m), len(rank)))
    confidence = 1.0 - best.chaos
    if confidence < config.MIN_ENCODING_CONFIDENCE:
        raise IngestError(
            f"{path}: not valid UTF-8, and the likeliest encoding ({name(best)}) decodes it with "
            f"{best.chaos:.0%} of garbled characters (pass --encoding to force one)"
        )
    return str(best), name(best)


def decode_file(path: Path, encoding: str | None = None) -> tuple[str, str]:
    """The text of a file and the encoding it was read in: UTF-8 (with or without BOM), a UTF-16/32
    BOM, ``encoding`` when given, else the encoding detected with a confidence floor. Refused:
    files over the document size limit (before reading them) and binary files."""
    size = path.stat().st_size
    if size > config.MAX_DOCUMENT_BYTES:
        raise IngestError(f"{path}: {size} bytes is larger than the {config.MAX_DOCUMENT_BYTES}-byte document limit")
    raw = path.read_bytes()
    if encoding:
        try:
            return raw.decode(encoding), encoding
        except LookupError:
            raise IngestError(f"unknown encoding {encoding!r}") from None
        except UnicodeDecodeError as e:
            raise IngestError(f"{path}: not valid {encoding} ({e.reason} at byte {e.start})") from None
    bom = next((enc for mark, enc in _BOMS if raw.startswith(mark)), None)
    if bom:
        try:
            return raw.decode(bom), bom
        except UnicodeDecodeError as e:
            raise IngestError(f"{path}: not valid {bom} ({e.reason} at byte {e.start})") from None
    if b"\x00" in raw:  # the whole file: one NUL past the first block is still binary
        raise IngestError(f"{path}: binary file (NUL bytes)")
    try:
        return raw.decode("utf-8-sig"), "utf-8"
    except UnicodeDecodeError:
        pass
    text = raw.decode("utf-8-sig", errors="replace")
    bad = text.count("\ufffd") - raw.count("\ufffd".encode())
    if bad <= sum(1 for c in text if ord(c) > 127 and c != "\ufffd") // 100 + (text.endswith("\ufffd") and bad == 1):
        # UTF-8 with a flaw (a multi-byte character cut at the end, a stray byte among many valid
        # sequences): another encoding would garble every accented character to save one
        return text, f"utf-8, {bad} invalid byte{'s' if bad > 1 else ''} replaced by U+FFFD"
    return _detect(raw, path)


class _HTMLText(html.parser.HTMLParser):
    """Visible text of an HTML page, headings turned into markdown headings."""

    _SKIP = {"script", "style", "noscript", "template"}
    _BLOCK = {"p", "div", "li", "br", "tr", "section", "article", "pre", "table", "ul", "ol", "blockquote"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.skip = 0
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in self._SKIP:
            self.skip += 1
        elif tag == "title":
            self._in_title = True
        elif len(tag) == 2 and tag[0] == "h" and tag[1].isdigit():
            self.out.append("\n\n" + "#" * int(tag[1]) + " ")
        elif tag in self._BLOCK:
            self.out.append("\n\n" if tag != "li" else "\n- ")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP and self.skip:
            self.skip -= 1
        elif tag == "title":
            self._in_title = False
        elif (len(tag) == 2 and tag[0] == "h" and tag[1].isdigit()) or tag in self._BLOCK:
            self.out.append("\n\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif not self.skip:
            self.out.append(data)


def html_to_text(source: str) -> str:
    p = _HTMLText()
    p.feed(source)
    p.close()
    text = "".join(p.out)
    lines = [" ".join(line.split()) for line in text.split("\n")]
    body = "\n".join(lines)
    while "\n\n\n" in body:
        body = body.replace("\n\n\n", "\n\n")
    body = body.strip()
    if p.title.strip() and not body.startswith("#"):
        body = f"# {p.title.strip()}\n\n{body}"
    return body


_ID_KEYS = ("id", "_id", "doc_id")
_RESERVED = {"text", "title", "source", "metadata", *_ID_KEYS}


def records_to_documents(records: list[Any], where: str) -> list[Document]:
    """JSON records with ``text`` (required), optional id/_id, title, source, metadata; other fields
    become metadata."""
    docs = []
    for i, rec in enumerate(records):
        if not isinstance(rec, dict) or not isinstance(rec.get("text"), str):
            raise IngestError(
                f"{where}: record {i + 1} has no string field 'text' (a .json or .jsonl file is read as "
                'records: {"text": ..., "id": ..., "metadata": {...}})'
            )
        meta: dict[str, Any] = {}
        if isinstance(rec.get("metadata"), dict):
            meta.update(rec["metadata"])
        meta.update({k: v for k, v in rec.items() if k not in _RESERVED})
        doc_id = next((str(rec[k]) for k in _ID_KEYS if rec.get(k) not in (None, "")), None)
        title = rec.get("title")
        text = f"{title.strip()}\n\n{rec['text']}" if isinstance(title, str) and title.strip() else rec["text"]
        # not validated here: the preparer checks each record (id, source, metadata) and skips a bad
        # one with its reason, without losing the file's other records
        src = rec.get("source") or where
        docs.append(Document.model_construct(text=text, id=doc_id, source=src, metadata=meta))
    return docs


def _parse_json(text: str, path: Path) -> list[Any]:
    try:
        if path.suffix.lower() == ".jsonl":
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise IngestError(f"{path}: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except RecursionError:
        raise IngestError(f"{path}: JSON nested too deeply") from None
    return data if isinstance(data, list) else [data]


def ingest_base(root: Path, base: Path | None = None) -> Path:
    """The directory document ids are relative to: ``base`` when given; else the current directory
    when ``root`` lies inside it; else the directory holding ``root``. Paths are made absolute and
    normalised first, so ``corpus``, ``./corpus/`` and ``/abs/corpus`` give the same ids."""
    root = Path(os.path.abspath(root))
    if base is not None:
        base = Path(os.path.abspath(base))
        if not root.is_relative_to(base):
            raise IngestError(f"{root} is not inside the ingest root {base}")
        return base
    return common_base([root])


def common_base(paths: Sequence[str | Path]) -> Path:
    """The ingest base of paths ingested together: the current directory when every path lies
    inside it, else the deepest directory holding all of them. For one path it is
    :func:`ingest_base`'s default; for several it keeps two files of one name in different
    directories (``a/METADATA``, ``b/METADATA``) two documents instead of one id overwritten."""
    full = [Path(os.path.abspath(p)) for p in paths]
    if not full:
        raise ValueError("common_base needs at least one path")
    cwd = Path(os.path.abspath(os.getcwd()))
    if all(p.is_relative_to(cwd) and p != cwd for p in full):
        return cwd
    return Path(os.path.commonpath([str(p.parent) for p in full]))


class _Ids:
    """Document ids of files: the path relative to the ingest base without its suffix, the suffix
    kept when a sibling file of another supported suffix has the same stem (``a.md`` and ``a.txt``
    become ``a.md`` and ``a.txt``, whatever was passed to ingest, so the id of a file never depends
    on which of its siblings are ingested with it)."""

    def __init__(self, base: Path, prefix: str = "") -> None:
        self.base, self.prefix = base, prefix
        self._stems: dict[Path, Counter[str]] = {}

    def _clashes(self, path: Path) -> bool:
        d = path.parent
        if d not in self._stems:
            self._stems[d] = Counter(
                p.stem
                for p in d.iterdir()
                if p.suffix.lower() in _DOC_SUFFIXES and not p.name.startswith(".") and p.is_file()
            )
        return self._stems[d][path.stem] > 1

    def source(self, path: Path) -> str:
        return path.relative_to(self.base).as_posix()

    def of(self, path: Path) -> str:
        """A file of another suffix (README.Debian, named on its own) keeps its whole name: its
        suffix is part of the name, and without it the id would be README.md's."""
        rel = path.relative_to(self.base)
        whole = path.suffix.lower() not in _DOC_SUFFIXES or self._clashes(path)
        return self.prefix + (rel if whole else rel.with_suffix("")).as_posix()


#: the suffixes of files that become one document each (JSON files hold records with ids of their own)
_DOC_SUFFIXES = TEXT_SUFFIXES - {".json", ".jsonl"}


@dataclass
class Loaded:
    docs: list[Document]
    skipped: list[Skipped]
    #: notes on files read (e.g. the encoding detected), as ``{"path", "message"}``
    notes: list[dict[str, str]]


def load_path(
    root: Path,
    doc_id: str | None = None,
    *,
    base: Path | None = None,
    id_prefix: str = "",
    encoding: str | None = None,
) -> Loaded:
    """Documents found at ``root`` (a file or a directory), the files skipped with why, and notes.
    Ids follow :class:`_Ids` from :func:`ingest_base`; two documents with one id are never both
    kept: the second is skipped with a reason naming the first."""
    files, other = _walk(root)
    ids = _Ids(ingest_base(root, base), id_prefix)
    out = Loaded([], [], [])
    if other:
        out.notes.append(_left_out(root, other, ids))
    seen: dict[str, str] = {}
    for path in files:
        apath = Path(os.path.abspath(path))
        source = ids.source(apath)
        try:
            found = _load_file(apath, source, encoding, out.notes)
        except IngestError as e:
            # the path is the entry's own field: not again in its reason (records name their source)
            out.skipped.append(Skipped(source, str(e).removeprefix(f"{apath}: ").removeprefix(f"{source}: ")))
            continue
        if not found:
            out.skipped.append(Skipped(source, "empty file"))
            continue
        for doc in found:
            if doc.id is None and apath.suffix.lower() not in (".json", ".jsonl"):  # a text file: its path
                doc.id = doc_id if (doc_id and len(files) == 1) else ids.of(apath)
            if doc.id is not None and doc.id in seen:
                out.skipped.append(Skipped(source, f"id {doc.id!r} is already the id of {seen[doc.id]}"))
                continue
            if doc.id is not None:
                seen[doc.id] = source
            out.docs.append(doc)
    return out


def _left_out(root: Path, other: list[Path], ids: "_Ids") -> dict[str, str]:
    """The note on the files of a directory that its walk leaves out for their suffix (README.Debian,
    CHANGES, *.gz under /usr/share/doc): they are named, not silently dropped."""
    shown = ", ".join(ids.source(Path(os.path.abspath(p))) for p in other[:5]) + (", …" if len(other) > 5 else "")
    return {
        "path": ids.source(Path(os.path.abspath(root))),
        "message": f"{len(other)} file{'s' if len(other) > 1 else ''} left out, not of a text suffix "
        f"({' '.join(sorted(TEXT_SUFFIXES))}): {shown}; name a file to ingest it as text",
    }


def _load_file(path: Path, source: str, encoding: str | None, notes: list[dict[str, str]]) -> list[Document]:
    text, used = decode_file(path, encoding)
    if used.startswith("utf-8,"):
        notes.append({"path": source, "message": f"not valid UTF-8: read as {used}"})
    elif used not in ("utf-8", encoding) and not used.startswith("utf-16") and not used.startswith("utf-32"):
        notes.append({"path": source, "message": f"not UTF-8: read as {used} (detected; --encoding forces one)"})
    suffix = path.suffix.lower()
    if suffix in (".json", ".jsonl"):
        return records_to_documents(_parse_json(text, path), source)
    if suffix in (".html", ".htm"):
        text = html_to_text(text)
    if not text.strip():
        return []
    return [Document(text=text, id=None, source=source, metadata={})]
