"""Document checks and preparation: what a write must pass before the store sees it, and the
chunked, tokenized, hashed form it is written in (outside any lock)."""

from __future__ import annotations

import codecs
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from . import config
from .errors import ValidationError
from .filters import MAX_KEY_LEN
from .models import Document, IngestReport
from .store.base import META_JSON, PreparedDocument, Store
from .store.sql.history import HISTORY_SEP
from .text.chunk import chunk_text
from .text.tokenize import TOKENIZER_VERSION, detect_language, index_tokens
from .timeexpr import parse_timestamp

__all__ = [
    "TOKENIZER_VERSION",
    "Preparer",
    "check_id",
    "check_metadata",
    "check_namespace",
    "check_size",
    "check_text",
    "check_vector",
    "common_root",
    "FileBatch",
    "ingest_path",
    "load_documents",
    "reconcile",
]

_LANGS = {"en", "fr", "de", "es", "zh"}


def check_namespace(ns: str) -> str:
    if not isinstance(ns, str) or not ns or len(ns) > 128 or any(ord(c) < 32 for c in ns):
        raise ValidationError(f"invalid namespace {ns!r}: 1-128 printable characters", field="namespace")
    return ns


def check_metadata(meta: Any, where: str, depth: int = 0) -> None:
    """Valid, bounded metadata: a JSON object of strings, 64-bit integers, finite numbers, booleans,
    nulls, lists and objects, within the budget of ``config.MAX_METADATA_*``."""
    if depth == 0 and not isinstance(meta, dict):
        raise ValidationError(f"metadata must be a JSON object, got {type(meta).__name__}", field=where)
    _check_metadata_value(meta, where, depth)
    if depth == 0:
        keys = _count_keys(meta)
        if keys > config.MAX_METADATA_KEYS:
            raise ValidationError(
                f"metadata of {keys} keys exceeds the limit of {config.MAX_METADATA_KEYS}", field=where
            )
        size = len(META_JSON(meta).encode("utf-8", "surrogatepass")) if meta else 2
        if size > config.MAX_METADATA_BYTES:
            raise ValidationError(
                f"metadata of {size} bytes (JSON) exceeds the {config.MAX_METADATA_BYTES}-byte limit per document",
                field=where,
            )


def _count_keys(v: Any) -> int:
    if isinstance(v, dict):
        return len(v) + sum(_count_keys(x) for x in v.values())
    if isinstance(v, list):
        return sum(_count_keys(x) for x in v)
    return 0


def _check_metadata_value(meta: Any, where: str, depth: int) -> None:
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
            _check_metadata_value(v, where, depth + 1)
            check_text(k, where)
    elif isinstance(meta, list):
        for v in meta:
            _check_metadata_value(v, where, depth + 1)
    elif isinstance(meta, str):
        check_text(meta, where)
        if "\x00" in meta:
            # PostgreSQL's JSONB cannot hold it and SQLite's JSON functions stop at it: refused on both
            raise ValidationError("metadata strings must not contain NUL characters", field=where)
        if len(meta) > config.MAX_METADATA_VALUE_CHARS:
            raise ValidationError(
                f"a metadata string of {len(meta)} characters exceeds the "
                f"{config.MAX_METADATA_VALUE_CHARS}-character limit",
                field=where,
            )
    elif isinstance(meta, int) and not isinstance(meta, bool) and not -(2**63) <= meta < 2**63:
        raise ValidationError("metadata integers must fit in 64 bits (a filter could not compare them)", field=where)
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


def check_size(text: str) -> None:
    """The one document size limit, on the text's UTF-8 bytes (counted only when it could matter)."""
    limit = config.MAX_DOCUMENT_BYTES
    size = len(text) if len(text) * 4 <= limit else len(text.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise ValidationError(f"text of {size} bytes (UTF-8) exceeds the {limit}-byte document limit", field="text")


def check_id(ident: str, field: str = "id") -> str:
    if not isinstance(ident, str) or not ident.strip() or len(ident) > 512 or any(ord(c) < 32 for c in ident):
        raise ValidationError(f"invalid id {ident!r}: 1-512 printable characters", field=field)
    if HISTORY_SEP in ident:
        raise ValidationError(
            f"invalid id {ident!r}: {HISTORY_SEP!r} is reserved for the ids of past versions", field=field
        )
    return ident.strip()


def check_vector(value: Any, dim: int, embedder: str | None, where: str = "vector") -> np.ndarray:
    """A precomputed vector as the store keeps its embedder's: a list of numbers or a 1-D numeric
    array of ``dim`` values, finite, not all zero; returned L2-normalised float32 (ValidationError
    naming ``where`` otherwise)."""
    if isinstance(value, np.ndarray):
        arr = value
    elif isinstance(value, (list, tuple)):
        if len(value) > config.MAX_VECTOR_DIM:
            raise ValidationError(f"{len(value)} values, more than {config.MAX_VECTOR_DIM}", field=where)
        if not all(isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) for x in value):
            raise ValidationError("must be a list of numbers", field=where)
        arr = np.asarray(value, dtype=np.float64)
    else:
        raise ValidationError(
            f"must be a list of numbers or a 1-D numpy array, got {type(value).__name__}", field=where
        )
    if arr.ndim != 1 or arr.dtype.kind not in "iuf":
        raise ValidationError(f"must be 1-D and numeric, got shape {arr.shape} of {arr.dtype}", field=where)
    if arr.shape[0] != dim:
        raise ValidationError(
            f"dimension {arr.shape[0]}, but the store's embedder {embedder or '?'} gives vectors of dimension {dim}",
            field=where,
        )
    arr = arr.astype(np.float64)
    if not np.isfinite(arr).all():
        raise ValidationError("values must be finite (no NaN or infinity)", field=where)
    scale = float(np.abs(arr).max())
    if scale == 0.0:
        raise ValidationError("an all-zero vector has no direction", field=where)
    arr = arr / scale  # no overflow in the norm of huge values
    return (arr / np.linalg.norm(arr)).astype(np.float32)


def _context(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str) or len(value) > config.MAX_CONTEXT_CHARS or "\x00" in value:
        raise ValidationError(
            f"context must be a string of at most {config.MAX_CONTEXT_CHARS} characters", field="context"
        )
    check_text(value, "context")
    return value


def _occurred(value: Any) -> float | None:
    if value is None:
        return None
    try:
        return parse_timestamp(value, field="occurred_at").timestamp()
    except ValueError as e:
        raise ValidationError(str(e), field="occurred_at") from None


def scoped_key(key: str, metadata: dict[str, Any]) -> str:
    """A memory's key within its scope (metadata ``user_id`` and ``agent_id``), as stored."""
    parts = [metadata.get("user_id"), metadata.get("agent_id")]
    return "\x1f".join("" if p is None else str(p) for p in parts) + "\x1f" + key


#: :data:`META_JSON` with the keys sorted: what a document's content hash covers
_META_JSON_SORTED = json.JSONEncoder(ensure_ascii=False, allow_nan=False, sort_keys=True).encode

#: a batch of prepared documents is written once its chunks hold this much text, however few they are
BATCH_CHARS = 8_000_000


def _once(read: Callable[[], tuple[str | None, int]]) -> Callable[[], tuple[str | None, int]]:
    """``read``, called at most once: its first answer is kept (one ``batches`` call's)."""
    kept: list[tuple[str | None, int]] = []

    def get() -> tuple[str | None, int]:
        if not kept:
            kept.append(read())
        return kept[0]

    return get


@dataclass(frozen=True)
class Preparer:
    """Turns documents into prepared documents (:class:`PreparedDocument`) with one memory's chunking settings."""

    chunk_size: int | None = config.DEFAULT_CHUNK_SIZE
    chunk_overlap: int = config.DEFAULT_CHUNK_OVERLAP
    #: the store's embedder and its dimension, asked only for a document with a precomputed vector
    vector_dim: Callable[[], tuple[str | None, int]] | None = field(default=None, compare=False)

    def _vector(self, value: Any, n_chunks: int) -> np.ndarray:
        """A document's precomputed vector, checked (:func:`check_vector`), as one row per chunk."""
        if n_chunks != 1:
            raise ValidationError(
                f"a vector is of one chunk, and this text makes {n_chunks} (chunk_size {self.chunk_size}): "
                "give it without a vector, split it, or use a larger chunk_size",
                field="vector",
            )
        if self.vector_dim is None:
            raise ValidationError("this memory takes no precomputed vectors", field="vector")
        name, dim = self.vector_dim()
        return check_vector(value, dim, name)[None, :]

    def prepare(self, doc: Document | dict[str, Any]) -> PreparedDocument:
        """Validate one document and chunk, tokenize and hash it (raises ValidationError)."""
        if isinstance(doc, dict):
            from pydantic import ValidationError as PydanticError  # noqa: PLC0415

            try:
                doc = Document(**doc)
            except PydanticError as e:
                first = e.errors()[0]
                field = ".".join(str(p) for p in first["loc"]) or "document"
                raise ValidationError(first["msg"], field=field) from None
            except TypeError as e:
                raise ValidationError(f"invalid document: {e}", field="document") from None
        text = doc.text
        if not isinstance(text, str) or not text.strip():
            raise ValidationError("text must not be empty", field="text")
        check_size(text)
        if "\x00" in text:
            raise ValidationError("text contains NUL characters (binary data?)", field="text")
        check_text(text, "text")
        check_metadata(doc.metadata, "metadata")
        if doc.source is not None and (not isinstance(doc.source, str) or len(doc.source) > 4096):
            raise ValidationError("source must be a string of at most 4096 characters", field="source")
        if doc.source is not None:
            check_text(doc.source, "source")
        meta_json = _META_JSON_SORTED(doc.metadata) if doc.metadata else "{}"
        doc_id = check_id(doc.id) if doc.id is not None else "mem-" + hashlib.sha1(text.encode()).hexdigest()[:12]
        occurred = _occurred(doc.occurred_at)
        content_hash = hashlib.sha256(
            json.dumps(
                [text, meta_json, doc.source, self.chunk_size, self.chunk_overlap, TOKENIZER_VERSION]
                + ([occurred, doc.key, doc.context] if occurred is not None or doc.key or doc.context else [])
            ).encode()
        ).hexdigest()
        chunks = chunk_text(text, self.chunk_size, self.chunk_overlap)
        vectors = None if doc.vector is None else self._vector(doc.vector, len(chunks))
        if vectors is not None:  # a new vector is new content: the write replaces the stored one
            content_hash = hashlib.sha256(
                f"{content_hash}:{hashlib.sha256(vectors.tobytes()).hexdigest()}".encode()
            ).hexdigest()
        ctx = _context(doc.context)
        given = doc.metadata.get("lang")
        lang = given if isinstance(given, str) and given in _LANGS else detect_language(text)
        return PreparedDocument(
            occurred_at=occurred,
            mem_key=scoped_key(doc.key, doc.metadata) if doc.key else None,
            doc_id=doc_id,
            source=doc.source,
            metadata=doc.metadata,
            content_hash=content_hash,
            chunks=chunks,
            tokens=[" ".join(index_tokens(c, lang, ctx)) for c in chunks],
            langs=[lang] * len(chunks),
            # the vector is of context + text: a chunk keeps its vector only when both are unchanged
            text_hashes=[hashlib.sha256((f"{ctx}\n{c}" if ctx else c).encode()).hexdigest() for c in chunks],
            context=ctx,
            vectors=vectors,
        )

    def keyed(self, doc: dict[str, Any], key: str, holder: Callable[[str], str | None]) -> PreparedDocument:
        """``doc`` prepared as the memory holding ``key`` in its scope: without an id, it goes on
        under the id of the memory holding the key now (``holder``: the stored key's id, or None),
        with that memory's history."""
        prepared = self.prepare({**doc, "key": key})
        held = holder(prepared.mem_key or "")
        if doc.get("id") is None and held is not None:  # the key's memory goes on under its id, with its history
            prepared = self.prepare({**doc, "key": key, "id": held})
        prepared.keep_history = True
        prepared.reason = f"key {key!r} written"
        return prepared

    def batches(
        self, docs: Iterable[Document | dict[str, Any]], batch_size: int, skipped: list[dict[str, str]] | None
    ) -> Iterator[list[PreparedDocument]]:
        """Prepared documents in batches of ``batch_size`` (fewer when their text passes
        :data:`BATCH_CHARS`). With ``skipped`` (a list), an invalid document is left out and listed
        there (its source and the reason); without, it raises."""
        batch: list[PreparedDocument] = []
        chars = 0
        # the store's embedder and dimension read once per call, not once per document's vector
        prep = self if self.vector_dim is None else replace(self, vector_dim=_once(self.vector_dim))
        for n, d in enumerate(docs):
            try:
                batch.append(prep.prepare(d))
            except ValidationError as e:
                if e.field == "vector":  # which document's, in a batch
                    e = ValidationError(str(e).removeprefix("vector: "), field=f"documents[{n}].vector")
                if skipped is None:
                    raise e from None
                ident = d.get("id") if isinstance(d, dict) else d.id
                src = d.get("source") if isinstance(d, dict) else d.source
                entry = {"path": str(src or ident or "?"), "reason": str(e)}
                skipped.append(entry | ({"id": str(ident)} if ident is not None and src else {}))
                continue
            chars += sum(map(len, batch[-1].chunks))
            if len(batch) >= batch_size or chars >= BATCH_CHARS:
                yield batch
                batch, chars = [], 0
        if batch:
            yield batch


@dataclass
class FileBatch:
    """What a file or directory holds, ready for ``add_documents``: the documents, the files or
    records skipped (``{"path", "reason"}``) and notes on what was read (``{"path", "message"}``)."""

    docs: list[Document]
    skipped: list[dict[str, str]]
    notes: list[dict[str, str]]


def load_documents(
    path: str | Path,
    *,
    metadata: dict[str, Any] | None = None,
    doc_id: str | None = None,
    base: str | Path | None = None,
    id_prefix: str = "",
    encoding: str | None = None,
    include_all: bool = False,
) -> FileBatch:
    """The documents of a file or directory, ``metadata`` merged into each (ids: see
    :func:`hybridmem.text.loaders.ingest_base`)."""
    if id_prefix:
        check_id(id_prefix, "id_prefix")
    if metadata:
        check_metadata(metadata, "metadata")
    if encoding:
        try:
            codecs.lookup(encoding)
        except LookupError:
            raise ValidationError(f"unknown encoding {encoding!r}", field="encoding") from None
    from .text.loaders import load_path  # noqa: PLC0415 - html.parser & co. only for files

    loaded = load_path(
        Path(path),
        doc_id=doc_id,
        base=Path(base) if base is not None else None,
        id_prefix=id_prefix,
        encoding=encoding,
        include_all=include_all,
    )
    if metadata:
        for d in loaded.docs:
            d.metadata = {**d.metadata, **metadata}
    return FileBatch(loaded.docs, [{"path": s.path, "reason": s.reason} for s in loaded.skipped], loaded.notes)


def common_root(paths: Sequence[str | Path]) -> Path:
    """The root several paths ingested together take their ids from when none is given: the current
    directory when every path lies inside it, else the deepest directory holding them all
    (:func:`hybridmem.text.loaders.common_base`)."""
    from .text.loaders import common_base  # noqa: PLC0415 - html.parser & co. only for files

    return common_base(paths)


def reconcile(
    batch: FileBatch, heads: dict[str, tuple[str | None, dict[str, Any]]], *, replace_metadata: bool = False
) -> FileBatch:
    """Re-ingest rules against what is stored (``heads``: id -> (source, metadata)): a document
    whose id is stored from another source is skipped, never silently overwritten; a document read
    again keeps its stored metadata, the new keys merged over it, unless ``replace_metadata``."""
    kept: list[Document] = []
    skipped = list(batch.skipped)
    for d in batch.docs:
        head = heads.get(d.id) if d.id is not None else None
        if head is None:
            kept.append(d)
            continue
        stored_source, stored_meta = head
        if stored_source is not None and d.source is not None and stored_source != d.source:
            skipped.append(
                {
                    "path": d.source,
                    "reason": f"id {d.id!r} already holds {stored_source}: not overwritten (give the files "
                    "apart with --id-prefix or --root, or delete the stored document first)",
                }
            )
            continue
        if not replace_metadata:
            d.metadata = {**stored_meta, **d.metadata}
        kept.append(d)
    return FileBatch(kept, skipped, batch.notes)


class Adds(Protocol):
    """What :func:`ingest_path` needs of the memory (``Memory`` is one)."""

    store: Store

    def add_documents(
        self,
        docs: Iterable[Document | dict[str, Any]],
        *,
        namespace: str | None = None,
        progress: Callable[[int], None] | None = None,
        skip_invalid: bool = False,
    ) -> IngestReport: ...


def ingest_path(
    mem: Adds,
    ns: str,
    path: str | Path,
    metadata: dict[str, Any] | None,
    doc_id: str | None,
    root: str | Path | None,
    id_prefix: str,
    encoding: str | None,
    replace_metadata: bool,
    progress: Callable[[int], None] | None,
    include_all: bool = False,
) -> IngestReport:
    """Ingest a file or a directory into ``ns`` (``Memory.ingest_path``): its documents, reconciled
    with what is stored, written with the bad ones skipped and listed.

    Ids are the paths relative to ``root`` (default: the current directory when the path is inside
    it, else the path's parent), without the suffix unless a sibling shares the stem, after
    ``id_prefix``. Several paths ingested as one set (two ``README.md`` of two directories) take
    ``root=common_root(paths)``, as the CLI does, so their ids keep the directories that tell them
    apart. A file read again keeps its stored metadata (``metadata`` merged over it) unless
    ``replace_metadata``. One bad file (too big, binary, undecodable, an id stored from another
    file...) is skipped with its reason: it must not abort the rest. A directory gives its files of
    a text suffix (``.gz`` read through; hidden directories are named, not entered), or every file
    whose content is text with ``include_all``."""
    batch = load_documents(
        path,
        metadata=metadata,
        doc_id=doc_id,
        base=root,
        id_prefix=id_prefix,
        encoding=encoding,
        include_all=include_all,
    )
    heads = mem.store.document_heads(ns, [d.id for d in batch.docs if d.id is not None])
    batch = reconcile(batch, heads, replace_metadata=replace_metadata)
    report = mem.add_documents(batch.docs, namespace=ns, progress=progress, skip_invalid=True)
    report.skipped = batch.skipped + report.skipped
    report.notes += batch.notes
    return report
