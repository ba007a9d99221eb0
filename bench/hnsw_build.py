"""Build a large store's HNSW graph across sessions (issue 18's 10M store) with the product's own
build (``DenseIndex._build_hnsw``: its parameters, dtype, seeded insertion order and checkpoints):
the partial graph is saved every ``--checkpoint-s`` seconds (``HYBRIDMEM_HNSW_CHECKPOINT_S``) in
``<db>.hnsw/``, so a build of hours that is stopped resumes from its last checkpoint instead of
starting over; at the end the product saves the graph and its vectors where it maps them
(``HnswFile.save``), and the store's next process maps them.

    python -m bench hnsw_build --db BIG.db                 # resumes from BIG.db.hnsw/ when it holds a checkpoint

Printed: the product's log (a resumed build says where it resumed), the checkpoints' progress as
they are written (rows of the build's order, rows per minute), and the run's seconds.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import threading
import time
from pathlib import Path


def _progress(meta: Path, every: float, stop: threading.Event) -> None:
    """Print each new checkpoint's progress (its ``done`` rows) as the product writes it."""
    seen, last_t, last_done = None, time.perf_counter(), None
    while not stop.wait(min(every, 30.0) or 1.0):
        try:
            done = int(json.loads(meta.read_text(encoding="utf-8"))["done"])
        except (OSError, ValueError, KeyError):
            continue
        if done != seen:
            now = time.perf_counter()
            rate = "" if last_done is None else f", {(done - last_done) / (now - last_t) * 60:,.0f} rows/min"
            print(f"  checkpoint: {done:,} rows{rate}", flush=True)
            seen, last_t, last_done = done, now, done


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", type=Path, required=True)
    ap.add_argument("--dtype", default="i8", choices=["f32", "f16", "i8"])
    ap.add_argument("--checkpoint-s", type=float, default=600.0)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args()
    # the product's build reads both when it starts (retrieve/dense.py: checkpoint_every, build_threads)
    os.environ["HYBRIDMEM_HNSW_CHECKPOINT_S"] = str(a.checkpoint_s)
    os.environ["HYBRIDMEM_HNSW_BUILD_THREADS"] = str(a.threads)
    logging.basicConfig(level=logging.INFO, format="  %(name)s: %(message)s")

    from bench._common import LookupEmbedder
    from hybridmem import Memory
    from hybridmem.retrieve.local import LocalLegs

    t0 = time.perf_counter()
    with Memory(a.db, embedder=LookupEmbedder(), auto_embed=False, chunk_size=None, hnsw_dtype=a.dtype) as m:
        legs = m.legs
        assert isinstance(legs, LocalLegs), "the embedded (SQLite) backend builds its graph in process"
        saved = legs._hnsw_file("default", m.store.embedder_info()[1] or 0)
        stop = threading.Event()
        if saved is not None:
            threading.Thread(target=_progress, args=(saved.partial_meta, a.checkpoint_s, stop), daemon=True).start()
        try:
            ready = m.wait_for_indexes()  # loads the vectors, restores or builds (resuming) and saves the graph
        finally:
            stop.set()
        idx = legs.dense_index("default")
        print(json.dumps({"ready": ready, "vectors": len(idx), "kind": idx.kind, "restored": idx.restored}), flush=True)
    print(f"(this run: {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
