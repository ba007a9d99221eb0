"""Turn files, directories, JSON records and stdin into :class:`~hybridmem.models.Document` objects.

Binary or undecodable files are skipped with the reason, named by their path; the rest goes on.
Ids and sources are relative to the ingest base (:func:`ingest_base`), so they do not depend on how
the path was typed.
"""

from __future__ import annotations

import gzip
import html.parser
import json
import logging
import os
import zlib
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
    """Files under ``path`` with a supported suffix, sorted, hidden directories skipped."""
    yield from _walk(path).taken


@dataclass
class _Walk:
    #: the files read: a text suffix (through ``.gz``), or any with ``include_all``
    taken: list[Path]
    #: the others, named in a "left out" note
    other: list[Path]
    #: hidden directories not entered (``.git``, ``.venv``), each with the files it holds
    hidden: list[tuple[Path, int]]


def kind_suffix(path: Path) -> str:
    """The suffix that says what a file holds: its own, or the one before ``.gz`` (``a.md.gz``:
    ``.md``), lower case."""
    suffix = path.suffix.lower()
    return Path(path.stem).suffix.lower() if suffix == ".gz" else suffix


def _walk(path: Path, include_all: bool = False) -> _Walk:
    """The files at ``path`` (itself, or those under it, sorted): those of a supported suffix (all
    with ``include_all``: then their content decides), and the others. A hidden *file* is a file
    like any other (``..md``, the page of the ``.`` command, has a text suffix); a hidden
    *directory* is not entered, but named."""
    if not path.exists():
        raise NotFoundError(f"no such file or directory: {path}")
    if path.is_file():
        return _Walk([path], [], [])
    out = _Walk([], [], [])
    for dirpath, dirnames, filenames in os.walk(path):
        here = Path(dirpath)
        for d in sorted(n for n in dirnames if n.startswith(".")):
            out.hidden.append((here / d, sum(len(f) for _, _, f in os.walk(here / d))))
        dirnames[:] = sorted(n for n in dirnames if not n.startswith("."))
        for name in filenames:
            p = here / name
            if p.is_file():
                (out.taken if include_all or kind_suffix(p) in TEXT_SUFFIXES else out.other).append(p)
    out.taken.sort()
    out.other.sort()
    out.hidden.sort()
    return out


def read_bytes(path: Path) -> bytes:
    """A file's bytes, a ``.gz`` file's decompressed; refused over the document size limit (a
    compressed file's once decompressed, read no further than the limit)."""
    limit = config.MAX_DOCUMENT_BYTES
    if path.suffix.lower() != ".gz":
        size = path.stat().st_size
        if size > limit:
            raise IngestError(f"{path}: {size} bytes is larger than the {limit}-byte document limit")
        return path.read_bytes()
    try:
        with gzip.open(path, "rb") as f:
            raw = f.read(limit + 1)
    except (OSError, EOFError, zlib.error) as e:
        raise IngestError(f"{path}: not a readable gzip file ({e})") from None
    if len(raw) > limit:
        raise IngestError(f"{path}: larger than the {limit}-byte document limit once decompressed")
    return raw


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
    BOM, ``encoding`` when given, else the encoding detected with a confidence floor; a ``.gz``
    file decompressed first. Refused: files over the document size limit (before reading them)
    and binary files."""
    raw = read_bytes(path)
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
_VECTOR_KEYS = ("vector", "embedding")
_RESERVED = {"text", "title", "source", "metadata", "occurred_at", *_ID_KEYS, *_VECTOR_KEYS}


def records_to_documents(records: list[Any], where: str) -> list[Document]:
    """JSON records with ``text`` (required), optional id/_id, title, source, metadata,
    ``occurred_at`` and a precomputed ``vector`` (or ``embedding``: a list of numbers of the
    store's dimension, checked by the preparer); other fields become metadata."""
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
        vector = next((rec[k] for k in _VECTOR_KEYS if rec.get(k) is not None), None)
        docs.append(
            Document.model_construct(
                text=text, id=doc_id, source=src, metadata=meta, vector=vector, occurred_at=rec.get("occurred_at")
            )
        )
    return docs


def _parse_json(text: str, path: Path) -> list[Any]:
    try:
        if kind_suffix(path) == ".jsonl":
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
        suffix is part of the name, and without it the id would be README.md's; so does a file
        whose stem is only dots (``..md``, the page of the ``.`` command: ``.`` is no id)."""
        rel = path.relative_to(self.base)
        whole = path.suffix.lower() not in _DOC_SUFFIXES or not path.stem.strip(".") or self._clashes(path)
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
    include_all: bool = False,
) -> Loaded:
    """Documents found at ``root`` (a file or a directory), the files skipped with why, and notes.
    Ids follow :class:`_Ids` from :func:`ingest_base`; two documents with one id are never both
    kept: the second is skipped with a reason naming the first."""
    walk = _walk(root, include_all)
    files = walk.taken
    ids = _Ids(ingest_base(root, base), id_prefix)
    out = Loaded([], [], [])
    if walk.other:
        out.notes.append(_left_out(root, walk.other, ids))
    if walk.hidden:
        out.notes.append(_hidden_note(root, walk.hidden, ids))
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
            if doc.id is None and kind_suffix(apath) not in (".json", ".jsonl"):  # a text file: its path
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
        f"({' '.join(sorted(TEXT_SUFFIXES))}, each also as .gz): {shown}; name a file to ingest it as text, "
        "or --include-all to take every file whose content is text",
    }


def _hidden_note(root: Path, hidden: list[tuple[Path, int]], ids: "_Ids") -> dict[str, str]:
    """The note on the hidden directories a walk does not enter (``.git``, ``.venv``)."""
    shown = ", ".join(
        f"{ids.source(Path(os.path.abspath(d)))}/ ({n} file{'s' if n != 1 else ''})" for d, n in hidden[:5]
    )
    return {
        "path": ids.source(Path(os.path.abspath(root))),
        "message": f"{len(hidden)} hidden director{'ies' if len(hidden) > 1 else 'y'} not entered: {shown}"
        + (", …" if len(hidden) > 5 else "")
        + "; name one to ingest it",
    }


def _load_file(path: Path, source: str, encoding: str | None, notes: list[dict[str, str]]) -> list[Document]:
    text, used = decode_file(path, encoding)
    if used.startswith("utf-8,"):
        notes.append({"path": source, "message": f"not valid UTF-8: read as {used}"})
    elif used not in ("utf-8", encoding) and not used.startswith("utf-16") and not used.startswith("utf-32"):
        notes.append({"path": source, "message": f"not UTF-8: read as {used} (detected; --encoding forces one)"})
    suffix = kind_suffix(path)
    if suffix in (".json", ".jsonl"):
        return records_to_documents(_parse_json(text, path), source)
    if suffix in (".html", ".htm"):
        text = html_to_text(text)
    if not text.strip():
        return []
    return [Document(text=text, id=None, source=source, metadata={})]
