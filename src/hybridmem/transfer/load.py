"""Import: records of the export format into a store (``import_records``), and an export file
checked whole before the store sees any of it, then imported (``import_file``).

Idempotent: a document the store holds with the same content hash is left as it is; one it holds
with another content is a conflict (``on_conflict``: ``error`` refuses the file before writing,
``skip`` keeps the store's, ``replace`` writes the file's). An import never deletes. Documents are
written in batches, each in one transaction: an import stopped midway leaves whole documents, and
running it again finishes it. Vectors are reused when the file's embedder is the store's; a
document without tokens, hashes or a language gets them as an ingest would."""

from __future__ import annotations

import gzip
import hashlib
import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

import numpy as np

from ..errors import StoreError, ValidationError
from ..ingest import check_namespace
from ..store.base import PreparedDocument, Store
from ..text.tokenize import detect_language, index_tokens
from .format import (
    DOCUMENT_TIMES,
    GRAPH_KINDS,
    MAX_LINE_BYTES,
    check_document,
    check_graph,
    check_header,
    decode_vector,
)
from .graph_io import load_graph

__all__ = ["ImportReport", "import_file", "import_records", "read_records"]

#: documents per write transaction
BATCH_DOCS = 200

ON_CONFLICT = ("error", "skip", "replace")


@dataclass
class ImportReport:
    #: name -> written, unchanged, conflicts, replaced, vectors, queued (chunks left to embed), graph_rows
    namespaces: dict[str, dict[str, int]] = field(default_factory=dict)
    vectors_reused: bool = False
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


def read_records(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) of an export file, plain or gzip; a bad line is a ValidationError naming it."""
    p = Path(path)
    with p.open("rb") as raw:
        gz = raw.read(2) == b"\x1f\x8b"
    opened = cast("IO[bytes]", gzip.open(p, "rb") if gz else p.open("rb"))
    with opened as f:
        n = 0
        while True:
            line = f.readline(MAX_LINE_BYTES + 1)
            if not line:
                return
            n += 1
            if len(line) > MAX_LINE_BYTES:
                raise ValidationError(f"line {n}: longer than {MAX_LINE_BYTES} bytes")
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise ValidationError(f"line {n}: not JSON ({e})") from None
            if not isinstance(rec, dict) or not isinstance(rec.get("kind"), str):
                raise ValidationError(f'line {n}: a record is a JSON object with a "kind"')
            yield n, rec


def _check(path: str | Path, store: Store, on_conflict: str) -> dict[str, Any]:
    """Read the whole file once: every record valid, the end record present and its counts right,
    and (``on_conflict="error"``) no document the store holds with other content. Returns the header."""
    header: dict[str, Any] | None = None
    counts: dict[str, dict[str, int]] = {}
    pending: dict[str, list[tuple[str, str]]] = {}
    conflicts: list[str] = []
    entities: dict[str, set[str]] = {}
    end = None
    for n, rec in read_records(path):
        try:
            if header is None:
                header = check_header(rec)
                continue
            if end is not None:
                raise ValidationError("a record after the end record")
            kind = rec["kind"]
            if kind == "document":
                _check_full(rec)
                check_document(rec, (header.get("embedder") or {}).get("dim"))
                c = counts.setdefault(rec["namespace"], {"documents": 0, "chunks": 0})
                c["documents"] += 1
                c["chunks"] += len(rec["chunks"])
                if on_conflict == "error":  # the ids are asked of the store 500 at a time
                    ids = pending.setdefault(rec["namespace"], [])
                    ids.append((rec["id"], _prepared_hash(rec)))
                    if len(ids) >= 500:
                        conflicts += _conflicts(store, rec["namespace"], ids)
                        ids.clear()
            elif kind == "end":
                end = rec
            elif kind in GRAPH_KINDS:
                check_graph(rec, entities.setdefault(str(rec.get("namespace")), set()))
            elif kind == "namespace":
                check_namespace(rec.get("name", ""))
            else:
                raise ValidationError(f"unknown record kind {kind!r}", field="kind")
        except ValidationError as e:
            raise ValidationError(f"line {n}: {e}") from None
    if header is None:
        raise ValidationError("the file is empty (no header line)")
    if end is None:
        raise ValidationError("the file ends without its end record: it was cut short (export it again)")
    for ns, c in (end.get("namespaces") or {}).items():
        got = counts.get(ns, {"documents": 0, "chunks": 0})
        if (c.get("documents"), c.get("chunks")) != (got["documents"], got["chunks"]):
            raise ValidationError(
                f"namespace {ns!r}: the end record counts {c.get('documents')} documents and {c.get('chunks')} "
                f"chunks, the file holds {got['documents']} and {got['chunks']}"
            )
    if on_conflict == "error":
        for ns, ids in pending.items():
            conflicts += _conflicts(store, ns, ids)
        if conflicts:
            raise StoreError(
                f"{len(conflicts)} document(s) the store holds with other content: {', '.join(conflicts[:5])}"
                f"{' …' if len(conflicts) > 5 else ''}; nothing was written (--on-conflict skip keeps the store's, "
                "replace writes the file's)"
            )
    return header


def _check_full(rec: dict[str, Any]) -> None:
    """A document with ``recorded_at`` is as an export wrote it: it carries every time field."""
    if rec.get("recorded_at") is not None:
        missing = [k for k in DOCUMENT_TIMES if k not in rec]
        if missing:
            raise ValidationError(f"a document with recorded_at carries every time field; missing {', '.join(missing)}")
    elif rec.get("valid_to") is not None:
        raise ValidationError("valid_to without recorded_at", field="valid_to")


def _conflicts(store: Store, ns: str, ids: list[tuple[str, str]]) -> list[str]:
    held = store.document_hashes(ns, [i for i, _ in ids])
    return [f"{ns}/{i}" for i, h in ids if i in held and held[i] != h]


def _use_vectors(header: dict[str, Any], store: Store, reembed: bool) -> bool:
    """Whether the file's vectors go in: its embedder is the store's (or the store has none yet)."""
    emb = header.get("embedder")
    if not header.get("vectors") or emb is None or reembed:
        return False
    name, dim = store.embedder_info()
    if name is None or not any(store.counts(n)["vectors"] for n in store.namespaces()):
        store.set_embedder(emb["name"], emb["dim"], reset_vectors=False)
        return True
    if (name, dim) != (emb["name"], emb["dim"]):
        raise StoreError(
            f"the file's vectors are of {emb['name']} ({emb['dim']} dimensions), the store's of {name} ({dim}): "
            "import with --reembed to leave the file's vectors out and queue every chunk for the store's embedder"
        )
    return True


def _prepared(rec: dict[str, Any]) -> PreparedDocument:
    """A document record as the store writes it; missing tokens, hashes and languages computed as an ingest would."""
    ctx = rec.get("context") or None
    texts = [c["text"] for c in rec["chunks"]]
    langs = [c.get("lang") or detect_language(t) for c, t in zip(rec["chunks"], texts)]
    ids = [c.get("id") for c in rec["chunks"]]
    meta = rec.get("metadata") or {}
    return PreparedDocument(
        doc_id=rec["id"],
        source=rec.get("source"),
        metadata=meta,
        content_hash=rec.get("content_hash")
        or hashlib.sha256(json.dumps([texts, meta, rec.get("source"), ctx], sort_keys=True).encode()).hexdigest(),
        chunks=texts,
        tokens=[
            c["tokens"] if c.get("tokens") is not None else " ".join(index_tokens(t, lang, ctx))
            for c, t, lang in zip(rec["chunks"], texts, langs)
        ],
        langs=langs,
        text_hashes=[
            c.get("text_hash") or hashlib.sha256((f"{ctx}\n{t}" if ctx else t).encode()).hexdigest()
            for c, t in zip(rec["chunks"], texts)
        ],
        chunk_ids=[i or f"{rec['id']}_p{k}" for k, i in enumerate(ids, start=1)] if any(ids) else None,
        occurred_at=rec.get("occurred_at") if rec.get("recorded_at") is None else None,
        context=ctx,
    )


class _Writer:
    """Batches of one namespace's documents into the store (see the module's docstring)."""

    def __init__(self, store: Store, ns: str, dim: int | None, vectors: bool, on_conflict: str, rep: ImportReport):
        self.store, self.ns, self.dim, self.vectors, self.on_conflict = store, ns, dim, vectors, on_conflict
        self.batch: list[dict[str, Any]] = []
        self.counts = rep.namespaces.setdefault(
            ns,
            {"written": 0, "unchanged": 0, "conflicts": 0, "replaced": 0, "vectors": 0, "queued": 0, "graph_rows": 0},
        )

    def add(self, rec: dict[str, Any]) -> None:
        self.batch.append(rec)
        if len(self.batch) >= BATCH_DOCS:
            self.flush()

    def flush(self) -> None:
        if not self.batch:
            return
        held = self.store.document_hashes(self.ns, [r["id"] for r in self.batch])
        todo = []
        for r in self.batch:
            h = held.get(r["id"])
            if h is None:
                todo.append(r)
            elif h == _prepared_hash(r):
                self.counts["unchanged"] += 1
            elif self.on_conflict == "replace":
                self.counts["replaced"] += 1
                todo.append(r)
            else:
                self.counts["conflicts"] += 1
        self.batch = []
        if not todo:
            return
        docs = [_prepared(r) for r in todo]
        res = self.store.write_documents(self.ns, docs)
        full = {r["id"]: tuple(r[k] for k in DOCUMENT_TIMES) for r in todo if r.get("recorded_at") is not None}
        if full:
            self.store.restore_times(self.ns, full)
        self.counts["written"] += len(todo)
        self.counts["queued"] += res.chunks_written - res.vectors_reused
        if self.vectors:
            self._vectors(todo, docs)

    def _vectors(self, todo: list[dict[str, Any]], docs: list[PreparedDocument]) -> None:
        assert self.dim is not None
        items: list[tuple[str, str, np.ndarray]] = []
        for r, d in zip(todo, docs):
            for k, c in enumerate(r["chunks"], start=1):
                v = c.get("vector")
                if v is not None:
                    vec = v if isinstance(v, np.ndarray) else decode_vector(v, self.dim, "vector")
                    items.append((d.chunk_id(k), d.text_hashes[k - 1], vec))
        if not items:
            return
        rowids = self.store.rowids_for(self.ns, [i for i, _, _ in items])
        self.store.store_vectors([(rowids[i], th, v) for i, th, v in items if i in rowids])
        self.counts["vectors"] += len(items)
        self.counts["queued"] -= len(items)


def _prepared_hash(rec: dict[str, Any]) -> str:
    """The content hash the store keeps for ``rec``: the file's, else computed as the write computes it."""
    return rec.get("content_hash") or _prepared(rec).content_hash


def import_records(
    recs: Iterable[dict[str, Any]],
    store: Store,
    *,
    reembed: bool = False,
    on_conflict: str = "skip",
    progress: Callable[[str, int], None] | None = None,
) -> ImportReport:
    """Write ``recs`` (header first, as :func:`read_records` or ``dump.records`` yields them) into
    ``store``. Checks each record as it comes; :func:`import_file` checks a whole file first."""
    if on_conflict not in ON_CONFLICT:
        raise ValidationError(f"on_conflict must be one of {', '.join(ON_CONFLICT)}", field="on_conflict")
    t0 = time.perf_counter()
    rep = ImportReport()
    it = iter(recs)
    header = check_header(next(it, None))
    dim = (header.get("embedder") or {}).get("dim")
    rep.vectors_reused = _use_vectors(header, store, reembed)
    writers: dict[str, _Writer] = {}
    graph: dict[str, list[dict[str, Any]]] = {}
    keys: dict[str, set[str]] = {}
    for rec in it:
        kind = rec.get("kind")
        if kind == "document":
            check_document(rec, dim)
            w = writers.get(rec["namespace"])
            if w is None:
                w = writers[rec["namespace"]] = _Writer(
                    store, rec["namespace"], dim, rep.vectors_reused, on_conflict, rep
                )
            w.add(rec)
            if progress and len(w.batch) == 0:
                progress(rec["namespace"], BATCH_DOCS)
        elif kind in GRAPH_KINDS:
            check_graph(rec, keys.setdefault(str(rec.get("namespace")), set()))
            graph.setdefault(rec["namespace"], []).append(rec)
        elif kind == "namespace":
            _ensure_namespace(store, rec.get("name"))
    for w in writers.values():
        w.flush()
    for ns, g in graph.items():
        if store.has_graph(ns):
            rep.notes.append(f"{ns}: the store already has a graph; the file's was left out")
            continue
        c = rep.namespaces.setdefault(ns, {"graph_rows": 0})
        c["graph_rows"] = load_graph(store, ns, g)
    rep.seconds = time.perf_counter() - t0
    return rep


def _ensure_namespace(store: Store, name: Any) -> None:
    check_namespace(name)
    if store.namespace_id(name) is None:
        with store.write_transaction() as w:
            store.namespace_id(name, w, create=True)


def import_file(
    path: str | Path,
    store: Store,
    *,
    reembed: bool = False,
    on_conflict: str = "error",
    progress: Callable[[str, int], None] | None = None,
) -> ImportReport:
    """Check the export file ``path`` whole (nothing is written when any of it is wrong), then import it."""
    if on_conflict not in ON_CONFLICT:
        raise ValidationError(f"on_conflict must be one of {', '.join(ON_CONFLICT)}", field="on_conflict")
    _check(path, store, on_conflict)
    return import_records(
        (rec for _, rec in read_records(path)),
        store,
        reembed=reembed,
        on_conflict="skip" if on_conflict == "error" else on_conflict,
        progress=progress,
    )
