"""Single-threaded BLAS for the query path's exact dense scans.

An exact scan is one matrix-vector product (``matrix @ q``). numpy's OpenBLAS splits it over every
core, but in hybridmem it never runs alone: the BM25 leg runs beside it in the same query, and a
server answers several queries at once. A BLAS thread that waits for a core held by another leg (or
another process) turns a 0.3 ms product into 5-10 ms: on a busy 2-core machine the 10k-chunk dense
leg took 9.5 ms p50 instead of ~1 ms, and even on an idle machine the two threads raise the p95 of
a 5k-chunk hybrid query from ~1.6 ms to 7-12 ms for no gain at p50 (bench/scaling.py,
bench/peers.py; docs/benchmarks.md).

OpenBLAS has one process-wide thread count, so :func:`query_blas` lowers it while at least one scan
is in progress and restores the previous value when the last one leaves (reference counted, so
concurrent queries do not undo each other). BLAS work elsewhere in the process (the ``use``
embedder's numpy matrices, the caller's own code) keeps every core except while a scan overlaps it.
Only numpy's own OpenBLAS is touched: torch's MKL or OpenMP pools are left alone.

``HYBRIDMEM_QUERY_BLAS_THREADS``: the thread count for scans (default 1); ``0`` or ``keep`` leaves
the BLAS thread count alone.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

ENV = "HYBRIDMEM_QUERY_BLAS_THREADS"

_lock = threading.Lock()
_inside = 0
_saved: int | None = None
_controller: _OpenBLAS | None = None
_looked_up = False


def scan_threads() -> int | None:
    """The BLAS thread count for exact scans, or None to leave BLAS alone."""
    raw = os.environ.get(ENV, "1").strip().lower()
    if raw in ("0", "keep", ""):
        return None
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"{ENV} must be a positive integer, 0 or 'keep', not {raw!r}") from None
    if n < 0:
        raise ValueError(f"{ENV} must be a positive integer, 0 or 'keep', not {raw!r}")
    return n


class _OpenBLAS:
    """numpy's OpenBLAS thread count, set through its own C API (ctypes). threadpoolctl finds the
    library, but its setter only obeys the first thread that ever called it, and scans run on leg
    threads."""

    def __init__(self, filepath: str) -> None:
        lib = ctypes.CDLL(filepath)
        for pre, suf in itertools.product(("", "scipy_"), ("", "64_", "_64")):
            get = getattr(lib, f"{pre}openblas_get_num_threads{suf}", None)
            put = getattr(lib, f"{pre}openblas_set_num_threads{suf}", None)
            if get is not None and put is not None:
                get.restype, get.argtypes = ctypes.c_int, []
                put.restype, put.argtypes = None, [ctypes.c_int]
                self._get, self._set = get, put
                break
        else:
            raise OSError(f"no openblas_get/set_num_threads in {filepath}")
        self.filepath = filepath

    def get_num_threads(self) -> int:
        return int(self._get())

    def set_num_threads(self, n: int) -> None:
        self._set(int(n))


def numpy_openblas() -> _OpenBLAS | None:
    """The OpenBLAS numpy is linked with (its wheel's bundled copy, with a process-wide pthreads
    pool), or None when numpy uses another BLAS, an OpenMP build (whose limit is per thread) or
    threadpoolctl is missing: then scans leave BLAS alone."""
    global _controller, _looked_up
    if _looked_up:
        return _controller
    with _lock:
        if not _looked_up:
            try:
                from threadpoolctl import ThreadpoolController
            except ImportError:  # pragma: no cover - a declared dependency
                ThreadpoolController = None
            if ThreadpoolController is not None:
                site = Path(np.__file__).resolve().parent.parent
                for lib in ThreadpoolController().lib_controllers:
                    path = Path(lib.filepath).resolve()
                    if (
                        lib.internal_api == "openblas"
                        and getattr(lib, "threading_layer", None) == "pthreads"
                        and path.is_relative_to(site)
                        and path.relative_to(site).parts[0].startswith("numpy")
                    ):
                        try:
                            _controller = _OpenBLAS(lib.filepath)
                        except OSError:
                            _controller = None
                        break
            _looked_up = True
    return _controller


@contextmanager
def query_blas() -> Iterator[None]:
    """Run the body with numpy's OpenBLAS limited to :func:`scan_threads` threads."""
    global _inside, _saved
    want = scan_threads()
    ctl = numpy_openblas() if want is not None else None
    if ctl is None:
        yield
        return
    assert want is not None  # ctl is looked up only when there is a limit
    with _lock:
        if _inside == 0:
            _saved = ctl.get_num_threads()
            if _saved != want:
                ctl.set_num_threads(want)
        _inside += 1
    try:
        yield
    finally:
        with _lock:
            _inside -= 1
            if _inside == 0 and _saved is not None and _saved != want:
                ctl.set_num_threads(_saved)


def limit_process_blas(n: int = 1) -> int | None:
    """Set numpy's OpenBLAS to ``n`` threads for the whole process, unless the user chose a count
    (``OPENBLAS_NUM_THREADS`` / ``OMP_NUM_THREADS``). For a server: many request threads each run
    numpy (query embedding, scans), and per-call BLAS threads oversubscribe the cores (docs/server.md:
    6x the throughput with one). Returns the count now in force, or None when left alone."""
    global _saved
    if os.environ.get("OPENBLAS_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS"):
        return None
    ctl = numpy_openblas()
    if ctl is None:
        return None
    with _lock:
        ctl.set_num_threads(n)
        if _inside:  # scans in progress restore this, not the count they saw on entry
            _saved = n
    return n
