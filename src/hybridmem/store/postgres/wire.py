"""The binary wire format of vectors: pgvector's ``vector`` in PostgreSQL's binary COPY and binary
results (int16 dim, int16 unused, then big-endian float4s), and its text form for a query vector."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg

__all__ = ["copy_vectors_binary", "vec_text", "vectors_binary"]


def vec_text(v: np.ndarray) -> str:
    # repr of each float32 (as a Python float) round-trips exactly through pgvector's float4 parser
    return "[" + ",".join(map(repr, np.asarray(v, np.float32).astype(np.float64).tolist())) + "]"


_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)


def copy_vectors_binary(cur: psycopg.Cursor, rows: Sequence[tuple[int, int, np.ndarray]]) -> None:
    """COPY (chunk_rowid, ns_id, embedding) rows in PostgreSQL's binary format: pgvector's binary
    form is int16 dim, int16 unused, then big-endian float4s — no text formatting of floats."""
    if not rows:
        return
    parts = [_COPY_HEADER]
    for rid, ns, v in rows:
        v = np.asarray(v, np.float32).ravel()
        body = struct.pack(">hh", v.shape[0], 0) + v.astype(">f4").tobytes()
        parts.append(struct.pack(">hiqiqi", 3, 8, int(rid), 8, int(ns), len(body)))
        parts.append(body)
    parts.append(struct.pack(">h", -1))
    with cur.copy("COPY vectors (chunk_rowid, ns_id, embedding) FROM STDIN (FORMAT BINARY)") as cp:
        cp.write(b"".join(parts))


def vectors_binary(conn: psycopg.Connection, sql: str, params: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """(rowids, matrix) of a ``SELECT rowid, embedding`` in binary: pgvector sends int16 dim, int16
    unused, then big-endian float4s — read with numpy, no text parsing (a million rows in seconds)."""
    with conn.cursor(binary=True) as cur:
        cur.execute(sql, list(params))
        rows = cur.fetchall()
    if not rows:
        return np.zeros(0, np.int64), np.zeros((0, 0), np.float32)
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    blob = b"".join(bytes(r[1])[4:] for r in rows)
    return ids, np.frombuffer(blob, dtype=">f4").astype(np.float32).reshape(len(rows), -1)
