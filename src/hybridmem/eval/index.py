"""A dataset's index: built once into the cache (aside, then renamed into place) and reused while
the corpus, chunking, tokenizer and embedder are unchanged."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .. import config
from ..embed import create_embedder, embedder_name
from ..embed.cache import CachedEmbedder
from ..ingest import TOKENIZER_VERSION
from ..memory import Memory
from .datasets import Dataset
from .modes import EvalConfig, Progress

#: bump when the index a dataset builds would differ for the same corpus and embedder
INDEX_FORMAT = 1


# ---------------------------------------------------------------------------------------- index
def index_key(ds: Dataset, embedder: str) -> str:
    blob = json.dumps(
        {
            "corpus": ds.fingerprint,
            "embedder": embedder,
            "chunk_size": ds.chunk_size,
            "overlap": config.DEFAULT_CHUNK_OVERLAP,
            "format": INDEX_FORMAT,
            "tokenizer": TOKENIZER_VERSION,
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def open_index(
    ds: Dataset, cfg: EvalConfig, need_vectors: bool, progress: Progress | None = None
) -> tuple[Memory, dict[str, Any]]:
    """The dataset's memory, from the cache when corpus, chunking and embedder are unchanged."""
    cache = Path(cfg.cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    name = embedder_name(cfg.embedder)
    key = index_key(ds, name)
    final = cache / f"{ds.name}-{key}"
    manifest_path = final / "manifest.json"
    info: dict[str, Any] = {"key": key, "path": str(final), "cached": manifest_path.is_file()}
    embedder = CachedEmbedder(create_embedder(cfg.embedder), cache / "embeddings.db")
    t0 = time.perf_counter()
    if not manifest_path.is_file():
        # built aside and renamed into place: an interrupted build never looks like a cached index
        tmp = cache / f".{ds.name}-{key}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        with Memory(tmp / "memory.db", embedder=embedder, chunk_size=ds.chunk_size, auto_embed=False) as mem:
            tick = progress(f"indexing {ds.name}", len(ds.docs)) if progress else None
            mem.add_documents(ds.docs, batch_size=512, progress=tick)
        (tmp / "manifest.json").write_text(
            json.dumps(
                {
                    "dataset": ds.name,
                    "fingerprint": ds.fingerprint,
                    "embedder": name,
                    "docs": len(ds.docs),
                    "chunk_size": ds.chunk_size,
                    "format": INDEX_FORMAT,
                    "built": utc_now(),
                    "index_s": round(time.perf_counter() - t0, 2),
                },
                indent=2,
            )
        )
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
    info["index_s"] = round(time.perf_counter() - t0, 2)
    mem = Memory(final / "memory.db", embedder=embedder, chunk_size=ds.chunk_size, auto_embed=False, llm=cfg.llm)
    pending = mem.store.pending_count()
    t1 = time.perf_counter()
    if need_vectors and pending:
        tick = progress(f"embedding {ds.name} ({name})", pending) if progress else None
        mem.wait_for_vectors(progress=tick)
    info["embed_s"] = round(time.perf_counter() - t1, 2)
    info["embedded_now"] = pending if need_vectors else 0
    info["cached_vectors"] = embedder.hits
    s = mem.stats()
    info.update(chunks=s.chunks, vectors=s.vectors)
    return mem, info


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
