"""Versions of a memory (issue 17), in SQL both backends speak (``?`` placeholders; PostgreSQL through
its qmark adapter): an update that keeps history *retires* the current version, renaming it
``{id}@@v{n}`` with ``valid_to`` (when it stopped being current) and ``head_id`` (the memory it is a
version of), then writes the new version under the memory's id. A retired version keeps its rows
(chunks, tokens, vectors, graph provenance): ``as_of`` and ``include_superseded`` read it like any
memory, and the default visibility (``valid_to IS NULL``) leaves it out. A soft delete retires
without a successor. A hard delete removes every version.

Times are epoch seconds (UTC): ``occurred_at`` (when it happened or was said), ``recorded_at``
(when this version was written: never changes), ``valid_to`` (when it was superseded or deleted)."""

from __future__ import annotations

import time
from typing import Any

from ..base import SQLReader

__all__ = [
    "HISTORY_SEP",
    "TIME_COLUMNS",
    "current_by_key",
    "EXPORTED_TIMES",
    "has_history",
    "history_id",
    "history_ids",
    "last_retired",
    "restore_times",
    "retire",
    "versions",
]

#: the separator of a retired version's id; a user's id may not contain it (``ingest.check_id``)
HISTORY_SEP = "@@v"

#: the columns of a version, in the order :func:`versions` returns them
VERSION_COLUMNS = (
    "doc_id, head_id, version, occurred_at, recorded_at, valid_to, change_reason, mem_key, content_hash, metadata"
)


def now_epoch() -> float:
    return time.time()


def history_id(doc_id: str, version: int) -> str:
    return f"{doc_id}{HISTORY_SEP}{int(version)}"


def retire(db: SQLReader, ns: int, doc_id: str, at: float, reason: str | None) -> tuple[str, list[int]] | None:
    """Rename the current version of ``doc_id`` to its history id, valid until ``at``; returns
    (history id, its chunk rowids), or None when there is no such memory. In the caller's
    transaction; the rowids' visibility changed, so the caller logs them as changed chunks."""
    row = db.execute("SELECT version FROM documents WHERE ns_id=? AND doc_id=?", (ns, doc_id)).fetchone()
    if row is None:
        return None
    hist = history_id(doc_id, int(row[0]))
    rowids = [int(r[0]) for r in db.execute("SELECT id FROM chunks WHERE ns_id=? AND doc_id=?", (ns, doc_id))]
    db.execute(
        "UPDATE documents SET doc_id=?, valid_to=?, head_id=?, change_reason=COALESCE(?, change_reason), "
        "mem_key=NULL WHERE ns_id=? AND doc_id=?",
        (hist, at, doc_id, reason, ns, doc_id),
    )
    db.execute(
        "UPDATE chunks SET doc_id=?, chunk_id=? || '_p' || CAST(ord AS TEXT) WHERE ns_id=? AND doc_id=?",
        (hist, hist, ns, doc_id),
    )
    return hist, rowids


def last_retired(db: SQLReader, ns: int, doc_ids: list[str]) -> dict[str, int]:
    """doc id -> the highest version among its retired ones, for the ids that have any: a memory
    written again under an id whose versions are all retired (superseded under its key, soft
    deleted) continues their numbering (starting again at 1 collided with ``{id}@@v1`` when the
    new version was retired in turn)."""
    out: dict[str, int] = {}
    for i in range(0, len(doc_ids), 500):
        part = doc_ids[i : i + 500]
        rows = db.execute(
            f"SELECT head_id, MAX(version) FROM documents WHERE ns_id=? AND head_id IN ({','.join('?' * len(part))}) "
            "GROUP BY head_id",
            (ns, *part),
        ).fetchall()
        out.update({str(r[0]): int(r[1]) for r in rows})
    return out


def versions(db: SQLReader, ns: int, doc_id: str) -> list[tuple[Any, ...]]:
    """Every stored version of a memory (the retired ones and the current one), oldest first."""
    return list(
        db.execute(
            f"SELECT {VERSION_COLUMNS} FROM documents WHERE ns_id=? AND (doc_id=? OR head_id=?) "
            "ORDER BY version, recorded_at",
            (ns, doc_id, doc_id),
        ).fetchall()
    )


def history_ids(db: SQLReader, ns: int, doc_id: str) -> list[str]:
    """The ids of the retired versions of a memory (a hard delete removes them with it)."""
    return [r[0] for r in db.execute("SELECT doc_id FROM documents WHERE ns_id=? AND head_id=?", (ns, doc_id))]


def has_history(db: SQLReader, ns: int) -> bool:
    """True when the namespace holds a retired version (then a search must leave them out)."""
    return (
        db.execute("SELECT 1 FROM documents WHERE ns_id=? AND valid_to IS NOT NULL LIMIT 1", (ns,)).fetchone()
        is not None
    )


def current_by_key(db: SQLReader, ns: int, mem_key: str) -> str | None:
    """The current memory written with ``mem_key`` (its scope and key, see ``Memory.add(key=)``)."""
    row = db.execute(
        "SELECT doc_id FROM documents WHERE ns_id=? AND mem_key=? AND valid_to IS NULL LIMIT 1", (ns, mem_key)
    ).fetchone()
    return None if row is None else str(row[0])


#: a document's times and version bookkeeping, as ``migrate`` carries them (with each chunk's context)
TIME_COLUMNS = ("occurred_at", "recorded_at", "valid_to", "version", "head_id", "mem_key", "change_reason")

#: what an import restores as it was (``restore_times``): :data:`TIME_COLUMNS`, then when the
#: document was first written and last changed
EXPORTED_TIMES = (*TIME_COLUMNS, "created_at", "updated_at")


def restore_times(db: SQLReader, ns: int, rows: dict[str, tuple[Any, ...]]) -> list[int]:
    """Set the :data:`EXPORTED_TIMES` of copied documents to the source's (an import, ``migrate``: a
    retired version stays retired, with its times, reason and key); returns the chunk rowids of the
    retired ones (their visibility changed: the caller logs them as changed chunks)."""
    sets = ", ".join(f"{c}=?" for c in EXPORTED_TIMES)
    retired: list[int] = []
    for doc_id, values in rows.items():
        db.execute(f"UPDATE documents SET {sets} WHERE ns_id=? AND doc_id=?", (*values, ns, doc_id))
        if values[2] is not None:  # valid_to
            retired += [int(r[0]) for r in db.execute("SELECT id FROM chunks WHERE ns_id=? AND doc_id=?", (ns, doc_id))]
    return retired
