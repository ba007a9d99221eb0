"""The compiled BM25 kernel (_bm25.c)."""

from typing import Any

Buffer = Any  # anything with the buffer protocol (collections.abc.Buffer is Python 3.12+)

K1: float
B: float

def topk(
    terms: list[tuple[Buffer, Buffer, float, float]],
    dl: Buffer,
    avgdl: float,
    rowids: Buffer,
    n_total: int,
    alive: Buffer | None,
    allowed: Buffer | None,
    k: int,
    /,
) -> tuple[list[tuple[int, float]], int, int]: ...
def max_ratio(positions: Buffer, tfs: Buffer, dl: Buffer, start: int, avgdl: float, /) -> float: ...
