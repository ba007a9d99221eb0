"""The evaluation sets of ../shared/data that tests read (never copied into the project)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
#: the five BEIR-format sets: English, French, Chinese, German, multi-hop English
BEIR_SETS = ["scifact", "piaf-fr", "xquad-zh", "xquad-de", "hotpotqa-hipporag-train100"]


def beir_set(name: str) -> Any:
    """One BEIR-format set of ../shared/data/beir, loaded as ``hybridmem eval`` loads it; the test is
    skipped when the shared data is not there."""
    from hybridmem.eval.datasets import load_dataset

    root = DATA / "beir" / name
    if not root.is_dir():
        pytest.skip(f"{root} not present")
    return load_dataset(str(root))
