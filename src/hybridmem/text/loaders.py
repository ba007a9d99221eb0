"""Turn files, directories, JSON records and stdin into :class:`~hybridmem.models.Document` objects.

Binary or undecodable files are skipped with a warning that names them; the rest goes on.
"""

from __future__ import annotations

import html.parser
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import config
from ..errors import IngestError, NotFoundError
from ..models import Document

__all__ = ["load_path", "iter_files", "records_to_documents", "TEXT_SUFFIXES", "Skipped"]

log = logging.getLogger(__name__)

TEXT_SUFFIXES = {".md", ".markdown", ".txt", ".rst", ".html", ".htm", ".json", ".jsonl"}


@dataclass
class Skipped:
    path: str
    reason: str


def iter_files(path: Path) -> Iterator[Path]:
    """Files under ``path`` with a supported suffix, sorted, hidden entries skipped."""
    if not path.exists():
        raise NotFoundError(f"no such file or directory: {path}")
    if path.is_file():
        yield path
        return
    for p in sorted(path.rglob("*")):
        rel = p.relative_to(path)
        if any(part.startswith(".") for part in rel.parts):
            continue
        if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES:
            yield p


def _decode(path: Path) -> str:
    size = path.stat().st_size
    if size > config.MAX_FILE_BYTES:
        raise IngestError(f"{path}: {size} bytes is larger than the {config.MAX_FILE_BYTES}-byte limit")
    raw = path.read_bytes()
    if b"\x00" in raw:  # the whole file: one NUL past the first block is still binary
        raise IngestError(f"{path}: binary file (NUL bytes)")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise IngestError(f"{path}: not valid UTF-8 text ({e.reason} at byte {e.start})") from None


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
            raise IngestError(f"{where}: record {i + 1} has no string field 'text'")
        meta: dict[str, Any] = {}
        if isinstance(rec.get("metadata"), dict):
            meta.update(rec["metadata"])
        meta.update({k: v for k, v in rec.items() if k not in _RESERVED})
        doc_id = next((str(rec[k]) for k in _ID_KEYS if rec.get(k) not in (None, "")), None)
        title = rec.get("title")
        text = f"{title.strip()}\n\n{rec['text']}" if isinstance(title, str) and title.strip() else rec["text"]
        docs.append(Document(text=text, id=doc_id, source=rec.get("source") or where, metadata=meta))
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


def derive_id(path: Path, root: Path) -> str:
    """A document id from a path: relative to the ingest root's parent, without suffix."""
    base = root.parent if root.is_dir() else path.parent
    rel = path.relative_to(base) if path.is_relative_to(base) else Path(path.name)
    return rel.with_suffix("").as_posix()


def load_path(root: Path, doc_id: str | None = None) -> tuple[list[Document], list[Skipped]]:
    """Documents found at ``root`` (a file or a directory), and the files skipped with why."""
    docs: list[Document] = []
    skipped: list[Skipped] = []
    files = list(iter_files(root))
    for path in files:
        try:
            text = _decode(path)
        except IngestError as e:
            log.warning("skipped %s", e)
            skipped.append(Skipped(str(path), str(e)))
            continue
        suffix = path.suffix.lower()
        source = path.as_posix()
        if suffix in (".json", ".jsonl"):
            try:
                docs.extend(records_to_documents(_parse_json(text, path), source))
            except IngestError as e:
                log.warning("skipped %s", e)
                skipped.append(Skipped(str(path), str(e)))
            continue
        if suffix in (".html", ".htm"):
            text = html_to_text(text)
        if not text.strip():
            skipped.append(Skipped(str(path), "empty file"))
            continue
        pid = doc_id if (doc_id and len(files) == 1) else derive_id(path, root)
        docs.append(Document(text=text, id=pid, source=source, metadata={}))
    return docs, skipped
