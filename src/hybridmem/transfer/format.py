"""The export format, version 1: JSON Lines, one record per line, each with a ``kind``
(docs/export-format.md). A header first, an ``end`` record last (a file without it was cut short);
between them, per namespace, a ``namespace`` record, its ``document`` records, and with the graph
its ``graph_*`` records.

Here: the constants, vectors as text, and the checks of one record (each error names the line and
the field)."""

from __future__ import annotations

import base64
import math
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..ingest import check_id, check_metadata, check_namespace, check_size, check_text
from ..store.sql.history import HISTORY_SEP

__all__ = [
    "DOCUMENT_TIMES",
    "FORMAT",
    "FORMAT_VERSION",
    "GRAPH_KINDS",
    "MAX_LINE_BYTES",
    "check_document",
    "check_graph",
    "check_header",
    "decode_vector",
    "encode_vector",
]

FORMAT = "hybridmem-export"
FORMAT_VERSION = 1

#: a line longer than this is refused before it is parsed (a document is at most ~10 MB of text)
MAX_LINE_BYTES = 64 * 1024 * 1024

#: a document record's time and version fields, in the order the store restores them
#: (store.sql.history.EXPORTED_TIMES; ``key`` and ``reason`` are the store's mem_key and change_reason)
DOCUMENT_TIMES = (
    "occurred_at",
    "recorded_at",
    "valid_to",
    "version",
    "head_id",
    "key",
    "reason",
    "created_at",
    "updated_at",
)

GRAPH_KINDS = ("graph_entity", "graph_relation", "graph_chunk", "graph_community", "graph_state")

#: the fields each graph record carries (graph_io writes them all; an import needs them all)
GRAPH_FIELDS = {
    "graph_entity": ("key", "name", "type", "description", "prov_hash", "stale", "mentions"),
    "graph_relation": ("src", "dst", "type", "description", "sources"),
    "graph_chunk": ("chunk_id", "extractor", "extracted_at"),
    "graph_community": (
        "community_id",
        "level",
        "parent",
        "members",
        "fingerprint",
        "title",
        "summary",
        "chunk_ids",
        "importance",
        "summary_model",
        "summarized_at",
    ),
    "graph_state": ("version", "built_at", "params"),
}


def encode_vector(v: np.ndarray) -> str:
    """A vector as base64 of its float32 little-endian bytes."""
    return base64.b64encode(np.asarray(v, "<f4").tobytes()).decode("ascii")


def decode_vector(text: Any, dim: int, where: str) -> np.ndarray:
    """The float32 vector ``text`` holds (base64, as :func:`encode_vector` writes it, or a list of
    numbers): ``dim`` finite values, not all zero."""
    if isinstance(text, np.ndarray):  # a record in process (``migrate``), not read from a file
        if text.shape != (dim,):
            raise ValidationError(f"shape {text.shape}; the embedder has {dim} dimensions", field=where)
        v = text.astype(np.float32, copy=False)
    elif isinstance(text, str):
        try:
            raw = base64.b64decode(text, validate=True)
        except ValueError:
            raise ValidationError("not base64 of float32 values", field=where) from None
        if len(raw) != 4 * dim:
            raise ValidationError(f"{len(raw) // 4} values; the file's embedder has {dim} dimensions", field=where)
        v = np.frombuffer(raw, "<f4").astype(np.float32)
    elif isinstance(text, list) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in text):
        if len(text) != dim:
            raise ValidationError(f"{len(text)} values; the file's embedder has {dim} dimensions", field=where)
        v = np.asarray(text, np.float32)
    else:
        raise ValidationError("a vector is base64 of float32 values or a list of numbers", field=where)
    if not np.isfinite(v).all() or not v.any():
        raise ValidationError("a vector's values must be finite and not all zero", field=where)
    return v


def check_header(rec: Any) -> dict[str, Any]:
    """The first line: this format, a version this code reads, the embedder of its vectors."""
    if not isinstance(rec, dict) or rec.get("kind") != "header" or rec.get("format") != FORMAT:
        raise ValidationError(f'the first line is not a {FORMAT} header ({{"kind": "header", "format": "{FORMAT}"}})')
    version = rec.get("format_version")
    if version != FORMAT_VERSION:
        raise ValidationError(
            f"format_version {version!r}: this hybridmem reads version {FORMAT_VERSION} only "
            "(export again with this version, or upgrade hybridmem)",
            field="format_version",
        )
    emb = rec.get("embedder")
    if emb is not None and not (
        isinstance(emb, dict)
        and isinstance(emb.get("name"), str)
        and isinstance(emb.get("dim"), int)
        and 0 < emb["dim"] <= 65536
    ):
        raise ValidationError('must be null or {"name": str, "dim": int}', field="embedder")
    if rec.get("vectors") and emb is None:
        raise ValidationError("the file holds vectors but names no embedder", field="embedder")
    return rec


def _opt_str(rec: dict[str, Any], key: str, limit: int = 4096) -> None:
    v = rec.get(key)
    if v is not None and not (isinstance(v, str) and len(v) <= limit):
        raise ValidationError(f"must be null or a string of at most {limit} characters", field=key)


def _opt_number(rec: dict[str, Any], key: str) -> None:
    v = rec.get(key)
    if v is not None and not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)):
        raise ValidationError("must be null or a finite number (epoch seconds)", field=key)


def check_document(rec: dict[str, Any], dim: int | None) -> None:
    """A ``document`` record: a namespace, an id, one or more chunks of text; the rest optional."""
    check_namespace(_required_str(rec, "namespace"))
    _check_doc_id(rec)
    meta = rec.get("metadata", {})
    if not isinstance(meta, dict):
        raise ValidationError("must be an object", field="metadata")
    check_metadata(meta, "metadata")
    for key in ("source", "content_hash", "head_id", "key", "reason", "created_at", "updated_at"):
        _opt_str(rec, key)
    _opt_str(rec, "context", 1 << 20)
    for key in ("occurred_at", "recorded_at", "valid_to"):
        _opt_number(rec, key)
    version = rec.get("version")
    if version is not None and not (isinstance(version, int) and not isinstance(version, bool) and version >= 1):
        raise ValidationError("must be null or an integer ≥ 1", field="version")
    chunks = rec.get("chunks")
    if not isinstance(chunks, list) or not chunks:
        raise ValidationError("must be a non-empty list of chunks", field="chunks")
    for i, c in enumerate(chunks):
        where = f"chunks[{i}]"
        if not isinstance(c, dict):
            raise ValidationError("must be an object", field=where)
        text = c.get("text")
        if not isinstance(text, str) or not text.strip():
            raise ValidationError("must be a non-empty string", field=f"{where}.text")
        check_size(text)
        check_text(text, f"{where}.text")
        for key in ("id", "text_hash", "lang", "tokens"):
            v = c.get(key)
            if v is not None and not isinstance(v, str):
                raise ValidationError("must be null or a string", field=f"{where}.{key}")
        if c.get("id") is not None and not (HISTORY_SEP in rec["id"] and c["id"].startswith(rec["id"])):
            check_id(c["id"], f"{where}.id")
        if c.get("vector") is not None:
            if dim is None:
                raise ValidationError("a vector, but the header names no embedder", field=f"{where}.vector")
            decode_vector(c["vector"], dim, f"{where}.vector")


def check_graph(rec: dict[str, Any], entities: set[str]) -> None:
    """A ``graph_*`` record: its namespace and every field its kind carries; an entity's key is
    added to ``entities`` (of its namespace), which a relation's ``src`` and ``dst`` must name."""
    check_namespace(_required_str(rec, "namespace"))
    missing = [k for k in GRAPH_FIELDS[rec["kind"]] if k not in rec]
    if missing:
        raise ValidationError(f"a {rec['kind']} record carries {', '.join(missing)}", field=missing[0])
    for key in ("key", "src", "dst", "chunk_id"):
        if key in rec:
            _required_str(rec, key)
    for key in ("mentions", "sources"):
        pairs = rec.get(key, [])
        if not isinstance(pairs, list) or not all(
            isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], (int, float))
            for p in pairs
        ):
            raise ValidationError("must be a list of [chunk id, number] pairs", field=key)
    if rec["kind"] == "graph_entity":
        entities.add(rec["key"])
    elif rec["kind"] == "graph_relation":
        for key in ("src", "dst"):
            if rec[key] not in entities:
                raise ValidationError(f"{rec[key]!r} is no graph_entity of the namespace before it", field=key)


def _check_doc_id(rec: dict[str, Any]) -> None:
    """A memory's id, or a past version's (``{head_id}@@v{n}``, with its ``head_id`` and ``valid_to``)."""
    doc_id = _required_str(rec, "id")
    if HISTORY_SEP not in doc_id:
        check_id(doc_id, "id")
        return
    head = rec.get("head_id")
    if not isinstance(head, str) or not doc_id.startswith(head + HISTORY_SEP) or rec.get("valid_to") is None:
        raise ValidationError(
            f"{doc_id!r} is a past version's id ({HISTORY_SEP!r}): it needs the head_id it starts with and a valid_to",
            field="id",
        )
    check_id(head, "head_id")


def _required_str(rec: dict[str, Any], key: str) -> str:
    v = rec.get(key)
    if not isinstance(v, str) or not v:
        raise ValidationError("must be a non-empty string", field=key)
    return v
