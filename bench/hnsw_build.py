"""Build a large store's HNSW graph across sessions (issue 18's 10M store): the product's build
(``DenseIndex._build_hnsw``: the same parameters, dtype and seeded insertion order) run in
batches with a checkpoint of the partial graph every ``--checkpoint-s`` seconds, so a build of
hours that is stopped resumes from its last checkpoint instead of starting over; at the end the
graph and its vectors are saved where the product opens them (``<db>.hnsw/``, ``HnswFile.save``),
and the store's next process maps them.

    python -m bench hnsw_build --db BIG.db                 # resumes from BIG.db.build/ when it holds a checkpoint

The vectors are read once into ``<db>.build/rows.f32`` (memory-mapped; kept between runs, with
their rowids and the store's vector version). Printed: rows added per minute, the checkpoints, the
total build time over all runs (``<db>.build/state.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", type=Path, required=True)
    ap.add_argument("--dtype", default="i8", choices=["f32", "f16", "i8"])
    ap.add_argument("--checkpoint-s", type=float, default=600.0)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args()

    from usearch.index import Index

    from bench._common import LookupEmbedder
    from hybridmem import Memory
    from hybridmem.retrieve.dense import HNSW_BUILD_BATCH, HNSW_PARAMS, graph_form

    work = Path(str(a.db) + ".build")
    work.mkdir(exist_ok=True)
    state_path, ckpt = work / "state.json", work / "partial.usearch"
    state = json.loads(state_path.read_text()) if state_path.exists() else {}

    def write_state() -> None:  # aside, then renamed: a stop mid-write leaves the last state
        state_path.with_suffix(".tmp").write_text(json.dumps(state))
        os.replace(state_path.with_suffix(".tmp"), state_path)

    with Memory(a.db, embedder=LookupEmbedder(), auto_embed=False, chunk_size=None, hnsw_dtype=a.dtype) as m:
        version = m.store.vector_version("default")
        if state.get("version") != version or not (work / "rows.f32").exists():
            t = time.perf_counter()

            def alloc(n: int, dim: int) -> np.ndarray:
                return np.memmap(work / "rows.f32", dtype=np.float32, mode="w+", shape=(n, dim))

            _, rowids, matrix = m.store.load_vectors("default", alloc=alloc)
            matrix.flush()
            np.save(work / "rowids.npy", rowids)
            state = {"version": version, "n": len(rowids), "dim": matrix.shape[1], "done": 0, "build_s": 0.0}
            state["load_s"] = round(time.perf_counter() - t, 1)
            ckpt.unlink(missing_ok=True)
            write_state()
            print(f"read {len(rowids):,} vectors in {state['load_s']} s", flush=True)
        n, dim = state["n"], state["dim"]
        rowids = np.load(work / "rowids.npy")
        matrix = np.memmap(work / "rows.f32", dtype=np.float32, mode="r", shape=(n, dim))
        hp = HNSW_PARAMS
        idx = Index(
            ndim=dim,
            metric=str(hp["metric"]),
            dtype=a.dtype,
            connectivity=int(hp["connectivity"]),
            expansion_add=int(hp["expansion_add"]),
        )
        if state.get("finished"):
            print(f"built already: {json.dumps(state)}")
            return
        state["done"] = 0  # unless a checkpoint says otherwise
        if ckpt.exists():
            idx.load(str(ckpt))
            # a stop between the checkpoint's rename and the state's write leaves the state behind:
            # the checkpoint holds the first len(idx) rows of the order, a whole number of batches
            assert len(idx) % HNSW_BUILD_BATCH == 0 or len(idx) == n, len(idx)
            state["done"] = len(idx)
            print(f"resumed at {state['done']:,} of {n:,} rows", flush=True)
        order = np.random.default_rng(0).permutation(n)  # the product's seeded order (all rows live)
        t0 = last = time.perf_counter()
        mark = state["done"]
        for s in range(state["done"], n, HNSW_BUILD_BATCH):
            # a batch's rows in rowid order, for reads from the map (usearch adds a batch's rows
            # concurrently: their order within it is not kept anyway)
            part = np.sort(order[s : s + HNSW_BUILD_BATCH])
            idx.add(rowids[part].astype(np.uint64), graph_form(np.asarray(matrix[part]), a.dtype), threads=a.threads)
            now = time.perf_counter()
            if now - last >= a.checkpoint_s or s + HNSW_BUILD_BATCH >= n:
                done = min(s + HNSW_BUILD_BATCH, n)
                rate = (done - mark) / (now - last) * 60
                idx.save(str(ckpt) + ".tmp")
                os.replace(str(ckpt) + ".tmp", ckpt)
                state.update(done=done, build_s=round(state["build_s"] + now - last, 1))
                write_state()
                print(f"  {done:,} of {n:,} rows, {rate:,.0f} rows/min, checkpoint saved", flush=True)
                last, mark = time.perf_counter(), done
        from hybridmem.retrieve.local import LocalLegs

        legs = m.legs
        assert isinstance(legs, LocalLegs)
        saved = legs._hnsw_file("default", dim)
        assert saved is not None
        ckpt.unlink(missing_ok=True)  # room for the saved files
        t = time.perf_counter()
        saved.save(idx, version, (rowids, lambda i, j: np.asarray(matrix[i:j])))
        state["save_s"] = round(time.perf_counter() - t, 1)
        state["finished"] = True
        write_state()
        print(json.dumps(state), flush=True)
        print(f"(this run: {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
