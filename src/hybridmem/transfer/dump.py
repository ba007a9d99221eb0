"""Export: a store's namespaces as the records of the export format (``records``), and those
records as JSON Lines (``write_export``), streamed: one page of documents in memory at a time."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import IO, Any

import numpy as np

from ..errors import NotFoundError
from ..store.base import Store
from ..store.sql.history import EXPORTED_TIMES
from .format import DOCUMENT_TIMES, FORMAT, FORMAT_VERSION, encode_vector
from .graph_io import graph_records

__all__ = ["ExportReport", "records", "to_json", "write_export"]

#: documents whose vectors are read together
_VECTOR_BATCH = 256


@dataclass
class ExportReport:
    namespaces: dict[str, dict[str, int]] = field(default_factory=dict)  # name -> documents, chunks, vectors, graph
    lines: int = 0
    seconds: float = 0.0


def records(
    store: Store,
    namespaces: Sequence[str] | None = None,
    *,
    vectors: bool = False,
    graph: bool = False,
    source: str = "",
) -> Iterator[dict[str, Any]]:
    """The export of ``namespaces`` (default: all) as records, header first and ``end`` last.
    Vectors are numpy arrays here (``write_export`` writes them as base64)."""
    names = list(store.namespaces() if namespaces is None else namespaces)
    missing = [n for n in names if n not in set(store.namespaces())]
    if missing:
        raise NotFoundError(f"no namespace {', '.join(map(repr, missing))} in {source or 'the store'}")
    name, dim = store.embedder_info()
    yield {
        "kind": "header",
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "exported_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "hybridmem": _version(),
        "source": source,
        "embedder": {"name": name, "dim": dim} if name and dim else None,
        "vectors": bool(vectors and name and dim),
        "graph": graph,
        "namespaces": names,
    }
    counts: dict[str, dict[str, int]] = {}
    for ns in names:
        yield {"kind": "namespace", "name": ns}
        c = counts[ns] = {"documents": 0, "chunks": 0, "vectors": 0, "graph_records": 0}
        for rec in _documents(store, ns, bool(vectors and name and dim)):
            c["documents"] += 1
            c["chunks"] += len(rec["chunks"])
            c["vectors"] += sum(1 for ch in rec["chunks"] if "vector" in ch)
            yield rec
        if graph:
            for g in graph_records(store, ns):
                c["graph_records"] += 1
                yield g
    yield {"kind": "end", "namespaces": counts}


def _documents(store: Store, ns: str, vectors: bool) -> Iterator[dict[str, Any]]:
    batch: list[dict[str, Any]] = []
    for d in store.export_documents(ns):
        batch.append(d)
        if len(batch) >= _VECTOR_BATCH:
            yield from _with_vectors(store, ns, batch, vectors)
            batch = []
    yield from _with_vectors(store, ns, batch, vectors)


def _with_vectors(store: Store, ns: str, batch: list[dict[str, Any]], vectors: bool) -> Iterator[dict[str, Any]]:
    vecs: dict[int, np.ndarray] = {}
    if vectors and batch:
        ids, mat = store.vectors_for([int(c[0]) for d in batch for c in d["chunks"]], ns)
        vecs = {int(r): mat[i] for i, r in enumerate(ids.tolist())}
    for d in batch:
        times = dict(zip(DOCUMENT_TIMES, (d["times"][c] for c in EXPORTED_TIMES)))
        chunks = []
        for rowid, chunk_id, text, text_hash, lang, tokens in d["chunks"]:
            ch: dict[str, Any] = {"id": chunk_id, "text": text, "text_hash": text_hash, "lang": lang, "tokens": tokens}
            if int(rowid) in vecs:
                ch["vector"] = vecs[int(rowid)]
            chunks.append(ch)
        yield {
            "kind": "document",
            "namespace": ns,
            "id": d["doc_id"],
            "source": d["source"],
            "metadata": _sorted(d["metadata"]),
            "content_hash": d["content_hash"],
            "context": d["context"],
            **times,
            "chunks": chunks,
        }


def _sorted(v: Any) -> Any:
    """Objects with their keys in order at every depth: one store's metadata is exported as
    another's (PostgreSQL's jsonb keeps keys in its own order, SQLite as written)."""
    if isinstance(v, dict):
        return {k: _sorted(v[k]) for k in sorted(v)}
    if isinstance(v, list):
        return [_sorted(x) for x in v]
    return v


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hybridmem")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree without installing
        return "unknown"


def _default(o: Any) -> Any:
    if isinstance(o, np.ndarray):
        return encode_vector(o)
    raise TypeError(f"{type(o).__name__} is not JSON serializable")


def to_json(rec: dict[str, Any]) -> str:
    """One record as its line (without the newline): compact, UTF-8 as is, vectors as base64."""
    return json.dumps(rec, ensure_ascii=False, default=_default, separators=(",", ":"))


def write_export(
    store: Store,
    out: IO[str],
    namespaces: Sequence[str] | None = None,
    *,
    vectors: bool = False,
    graph: bool = False,
    source: str = "",
) -> ExportReport:
    """Write the export of ``namespaces`` to ``out``, one JSON record per line."""
    t0 = time.perf_counter()
    rep = ExportReport()
    for rec in records(store, namespaces, vectors=vectors, graph=graph, source=source):
        out.write(to_json(rec) + "\n")
        rep.lines += 1
        if rec["kind"] == "end":
            rep.namespaces = rec["namespaces"]
    rep.seconds = time.perf_counter() - t0
    return rep
