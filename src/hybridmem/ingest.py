"""Document checks and preparation: what a write must pass before the store sees it, and the
chunked, tokenized, hashed form it is written in (outside any lock)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import config
from .errors import ValidationError
from .filters import MAX_KEY_LEN
from .models import Document
from .store.base import PreparedDocument
from .text.chunk import chunk_text
from .text.loaders import load_path
from .text.tokenize import TOKENIZER_VERSION, detect_language, tokenize

__all__ = [
    "TOKENIZER_VERSION",
    "Preparer",
    "check_id",
    "check_metadata",
    "check_namespace",
    "check_text",
    "load_documents",
]

_LANGS = {"en", "fr", "de", "es", "zh"}


def check_namespace(ns: str) -> str:
    if not isinstance(ns, str) or not ns or len(ns) > 128 or any(ord(c) < 32 for c in ns):
        raise ValidationError(f"invalid namespace {ns!r}: 1-128 printable characters", field="namespace")
    return ns


def check_metadata(meta: Any, where: str, depth: int = 0) -> None:
    if depth == 0 and not isinstance(meta, dict):
        raise ValidationError(f"metadata must be a JSON object, got {type(meta).__name__}", field=where)
    if depth > 16:
        raise ValidationError("metadata nested deeper than 16 levels", field=where)
    if isinstance(meta, dict):
        for k, v in meta.items():
            if not isinstance(k, str):
                raise ValidationError(f"metadata keys must be strings, got {k!r}", field=where)
            if depth == 0 and (
                not k
                or len(k) > MAX_KEY_LEN
                or k.startswith("$")
                or any(c in k for c in '"\\')
                or any(ord(c) < 32 for c in k)
            ):
                raise ValidationError(
                    f"invalid metadata key {k!r}: 1-{MAX_KEY_LEN} characters, no quotes, backslashes, control "
                    "characters or leading '$'",
                    field=where,
                )
            check_metadata(v, where, depth + 1)
            check_text(k, where)
    elif isinstance(meta, list):
        for v in meta:
            check_metadata(v, where, depth + 1)
    elif isinstance(meta, str):
        check_text(meta, where)
    elif isinstance(meta, float) and not np.isfinite(meta):
        raise ValidationError("metadata numbers must be finite (no NaN or Infinity)", field=where)
    elif not (meta is None or isinstance(meta, (str, int, float, bool))):
        raise ValidationError(f"metadata value of type {type(meta).__name__} is not JSON", field=where)


def check_text(text: str, where: str) -> None:
    """Strings must be encodable UTF-8: an unpaired surrogate ("\udc00") cannot be stored."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(f"{where}: text with an unpaired surrogate is not valid Unicode", field=where) from None


def check_id(ident: str, field: str = "id") -> str:
    if not isinstance(ident, str) or not ident.strip() or len(ident) > 512 or any(ord(c) < 32 for c in ident):
        raise ValidationError(f"invalid id {ident!r}: 1-512 printable characters", field=field)
    return ident.strip()


@dataclass(frozen=True)
class Preparer:
    """Turns documents into prepared documents (:class:`PreparedDocument`) with one memory's chunking settings."""

    chunk_size: int | None = config.DEFAULT_CHUNK_SIZE
    chunk_overlap: int = config.DEFAULT_CHUNK_OVERLAP

    def prepare(self, doc: Document | dict[str, Any]) -> PreparedDocument:
        """Validate one document and chunk, tokenize and hash it (raises ValidationError)."""
        if isinstance(doc, dict):
            try:
                doc = Document(**doc)
            except Exception as e:
                raise ValidationError(f"invalid document: {e}", field="document") from None
        text = doc.text
        if not isinstance(text, str) or not text.strip():
            raise ValidationError("text must not be empty", field="text")
        if len(text) > config.MAX_TEXT_CHARS:
            raise ValidationError(f"text of {len(text)} characters exceeds {config.MAX_TEXT_CHARS}", field="text")
        if "\x00" in text:
            raise ValidationError("text contains NUL characters (binary data?)", field="text")
        check_text(text, "text")
        check_metadata(doc.metadata, "metadata")
        meta_json = json.dumps(doc.metadata, sort_keys=True, ensure_ascii=False, allow_nan=False)
        doc_id = check_id(doc.id) if doc.id is not None else "mem-" + hashlib.sha1(text.encode()).hexdigest()[:12]
        content_hash = hashlib.sha256(
            json.dumps([text, meta_json, doc.source, self.chunk_size, self.chunk_overlap, TOKENIZER_VERSION]).encode()
        ).hexdigest()
        chunks = chunk_text(text, self.chunk_size, self.chunk_overlap)
        lang = doc.metadata.get("lang") if doc.metadata.get("lang") in _LANGS else detect_language(text)
        return PreparedDocument(
            doc_id=doc_id,
            source=doc.source,
            metadata=doc.metadata,
            content_hash=content_hash,
            chunks=chunks,
            tokens=[" ".join(tokenize(c, lang)) for c in chunks],
            langs=[lang] * len(chunks),
            text_hashes=[hashlib.sha256(c.encode()).hexdigest() for c in chunks],
        )

    def batches(
        self, docs: Iterable[Document | dict[str, Any]], batch_size: int, skipped: list[dict[str, str]] | None
    ) -> Iterator[list[PreparedDocument]]:
        """Prepared documents in batches of ``batch_size``. With ``skipped`` (a list), an invalid
        document is left out and listed there (its source and the reason); without, it raises."""
        batch: list[PreparedDocument] = []
        for d in docs:
            try:
                batch.append(self.prepare(d))
            except ValidationError as e:
                if skipped is None:
                    raise
                src = d.get("source") or d.get("id") if isinstance(d, dict) else (d.source or d.id)
                skipped.append({"path": str(src or "?"), "reason": str(e)})
                continue
            if len(batch) >= batch_size:
                yield batch
                batch = []
        if batch:
            yield batch


def load_documents(
    path: str | Path, *, metadata: dict[str, Any] | None = None, doc_id: str | None = None
) -> tuple[list[Document], list[dict[str, str]]]:
    """The documents of a file or directory (``metadata`` merged into each) and the files skipped
    with their reasons."""
    docs, skipped = load_path(Path(path), doc_id=doc_id)
    if metadata:
        for d in docs:
            d.metadata = {**d.metadata, **metadata}
    return docs, [{"path": s.path, "reason": s.reason} for s in skipped]
