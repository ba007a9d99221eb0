"""Crash safety (issue 8, faults): a child process ingests into a real SQLite store while the
parent kills it with SIGKILL at random moments; after every kill the store opens, passes
``PRAGMA integrity_check``, holds every acknowledged write (BM25 and, once embedded, the vector
leg), and no chunk exists in one leg but not the other.

The child is tests/crash_child.py (its docstring describes the log protocol). Seeded: the delays and
the child's writes are reproducible (``HYBRIDMEM_CRASH_SEED`` overrides the seed).
"""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crash_child import Replay, replay
from hybridmem import Memory

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")

CHILD = Path(__file__).resolve().parents[1] / "crash_child.py"
SEED = int(os.environ.get("HYBRIDMEM_CRASH_SEED", "8"))
STORES = 4
KILLS_PER_STORE = 5  # kills while ingesting: 4 x 5 = 20, plus one kill per store while it opens
NS = "default"


class Child:
    def __init__(self, db: Path, log: Path, seed: int, stderr: Path) -> None:
        self.stderr_path = stderr
        self._err = open(stderr, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), str(db), str(log), str(seed)],
            stdout=subprocess.PIPE,
            stderr=self._err,
            env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"},
        )
        self._buf = b""

    def wait_for(self, word: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        while (word + "\n").encode() not in self._buf:
            left = deadline - time.monotonic()
            assert left > 0, f"child never said {word!r}; stderr:\n{self.stderr()}"
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 4096)
                assert chunk, f"child exited before {word!r} (rc={self.proc.wait()}); stderr:\n{self.stderr()}"
                self._buf += chunk

    def kill(self) -> int:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        rc = self.proc.wait(timeout=30)
        self.proc.stdout.close()  # type: ignore[union-attr]
        self._err.close()
        return rc

    def stderr(self) -> str:
        self._err.flush()
        return self.stderr_path.read_text(errors="replace")[-3000:]


def _rowids(db, sql: str, *args) -> set[int]:
    return {r[0] for r in db.execute(sql, args)}


def check_legs_consistent(mem: Memory) -> dict[str, int]:
    """No chunk in one leg but not the other, and no row without its chunk or document."""
    db = mem.store.reader
    ns = db.execute("SELECT id FROM namespaces WHERE name=?", (NS,)).fetchone()
    if ns is None:  # killed before the first write committed
        assert db.execute("SELECT count(*) FROM chunks").fetchone()[0] == 0
        return {"chunks": 0, "vectors": 0, "queued": 0}
    ns = ns[0]
    chunks = _rowids(db, "SELECT id FROM chunks WHERE ns_id=?", ns)
    fts = _rowids(db, f"SELECT rowid FROM tokens_{ns}")
    vectors = _rowids(db, "SELECT chunk_rowid FROM vectors")
    queued = _rowids(db, "SELECT chunk_rowid FROM embed_queue")
    assert fts == chunks, (
        f"BM25 rows without chunk: {sorted(fts - chunks)[:10]}; chunks without BM25 tokens: {sorted(chunks - fts)[:10]}"
    )
    empty = _rowids(db, f"SELECT rowid FROM tokens_{ns} WHERE length(trim(tokens)) = 0")
    assert not empty, f"chunks with no BM25 tokens: {sorted(empty)[:10]}"
    assert vectors <= chunks, f"vectors of deleted chunks: {sorted(vectors - chunks)[:10]}"
    assert queued <= chunks, f"queue entries of deleted chunks: {sorted(queued - chunks)[:10]}"
    assert not vectors & queued, f"chunks both embedded and queued: {sorted(vectors & queued)[:10]}"
    lost = chunks - vectors - queued
    assert not lost, f"chunks with neither a vector nor a queue entry (lost to the dense leg): {sorted(lost)[:10]}"
    dim = mem.store.embedder_info()[1]
    if vectors:
        assert dim and {r[0] for r in db.execute("SELECT DISTINCT length(vec) FROM vectors")} == {4 * dim}
    # documents <-> chunks: every document has exactly its n_chunks chunks, every chunk its document
    bad = db.execute(
        "SELECT d.doc_id, d.n_chunks, count(c.id) FROM documents d LEFT JOIN chunks c "
        "ON c.ns_id = d.ns_id AND c.doc_id = d.doc_id WHERE d.ns_id=? GROUP BY d.doc_id HAVING d.n_chunks != count(c.id)",
        (ns,),
    ).fetchall()
    assert not bad, f"documents whose chunk count is off: {bad[:5]}"
    orphans = db.execute(
        "SELECT count(*) FROM chunks c WHERE c.ns_id=? AND NOT EXISTS "
        "(SELECT 1 FROM documents d WHERE d.ns_id=c.ns_id AND d.doc_id=c.doc_id)",
        (ns,),
    ).fetchone()[0]
    assert orphans == 0, f"{orphans} chunks without their document"
    return {"chunks": len(chunks), "vectors": len(vectors), "queued": len(queued)}


def current_token(doc: dict) -> str:
    first = doc["chunks"][0]["text"]
    toks = [w for w in first.split() if w.startswith("uq") and w.endswith("z")]
    assert len(toks) == 1, first
    return toks[0]


def check_acknowledged_writes(mem: Memory, known: Replay) -> int:
    """Every acknowledged document is there, in its acknowledged state (or, for the one write the
    kill interrupted, in its old or new state) and found by BM25 through its unique token; deleted
    and replaced versions are not. Returns the number of live documents checked."""
    ids = set(known.state) | known.unsure_ids()
    live = 0
    for doc_id in sorted(ids):
        allowed = known.allowed(doc_id)
        doc = mem.store.get_document(NS, doc_id)
        if doc is None:
            assert None in allowed, f"acknowledged document {doc_id} is missing (expected token {allowed})"
        else:
            tok = current_token(doc)
            assert tok in allowed, f"{doc_id} holds {tok}, expected one of {allowed}"
            live += 1
            hits = mem.search(tok, mode="bm25", top_k=3).results
            assert hits and hits[0].doc_id == doc_id, f"BM25 search for {tok} did not return {doc_id}: {hits[:1]}"
        for old in known.tokens.get(doc_id, []):
            if doc is None or old != current_token(doc):
                hits = mem.search(old, mode="bm25", top_k=3).results
                assert doc_id not in {h.doc_id for h in hits}, f"stale token {old} still finds {doc_id}"
    return live


def check_vector_leg(mem: Memory) -> None:
    """After embedding the queue: every chunk has its vector and a vector search for a chunk's own
    text returns that chunk first (cosine ~1)."""
    mem.embed_pending()
    c = mem.store.counts(NS)
    assert c["pending_vectors"] == 0 and c["vectors"] == c["chunks"], c
    rows = mem.store.reader.execute(
        "SELECT c.chunk_id, c.text FROM chunks c JOIN namespaces n ON n.id = c.ns_id WHERE n.name=?", (NS,)
    ).fetchall()
    for chunk_id, text in rows:
        # every version: an update keeps the one it replaced (retired, still searchable this way)
        hits = mem.search(text, mode="vector", top_k=1, include_superseded=True).results
        assert hits and hits[0].chunk_id == chunk_id and hits[0].scores["dense"] > 0.999, (chunk_id, hits[:1])


def test_sigkill_during_ingest_loses_no_acknowledged_write(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    t_start = time.monotonic()
    kills = acked = 0
    mid_write = 0  # kills that interrupted a write (an intent without its ack)
    for s in range(STORES):
        db, log = tmp_path / f"s{s}.db", tmp_path / f"s{s}.log"
        for k in range(KILLS_PER_STORE + 1):
            seed = SEED * 1000 + s * 100 + k
            child = Child(db, log, seed, tmp_path / f"s{s}-{k}.err")
            try:
                if k == 0:  # a fresh store: kill it while it imports, creates and migrates the file
                    child.wait_for("imported")
                    time.sleep(rng.uniform(0.0, 0.08))
                else:  # an existing store: kill it while it writes and embeds
                    child.wait_for("ready")
                    time.sleep(rng.uniform(0.05, 0.45))
            finally:
                rc = child.kill()
            assert rc == -signal.SIGKILL, f"the child died on its own (rc={rc}); stderr:\n{child.stderr()}"
            kills += 1
            known = replay(log)
            with Memory(db, embedder="hash", auto_embed=False, chunk_size=200, chunk_overlap=20) as mem:
                assert mem.store.integrity_check() == "ok"
                check_legs_consistent(mem)
                live = check_acknowledged_writes(mem, known)
                assert mem.stats().documents == live
                check_vector_leg(mem)
                check_legs_consistent(mem)
        mid_write += len(known.unsure)  # the log of a store keeps every interrupted write
        acked += known.ops
    elapsed = time.monotonic() - t_start
    assert kills == STORES * (KILLS_PER_STORE + 1)
    # the kills did land on a busy writer: many acknowledged writes, some kills in the middle of one
    assert acked > 50 * STORES, acked
    assert mid_write >= 1, "no kill interrupted a write: the test did not exercise what it claims"
    print(f"{kills} kills, {acked} acknowledged writes, {mid_write} kills mid-write, {elapsed:.1f}s")


def test_replay_of_a_log_with_an_interrupted_write(tmp_path: Path) -> None:
    """The parent's oracle: acknowledged writes apply, the last unacknowledged one is 'either'."""
    log = tmp_path / "l.log"
    log.write_text(
        "R 1\nI add a=t1 b=t2\nA\nI update a=t3\nA\nI delete b\nA\nI add d=t6\n"  # run 1 killed mid-add
        "R 2\nI add c=t4\nA\nI update c=t5\nA\nI delete c\nI ad"
    )  # run 2: the kill cut the last line
    r = replay(log)
    assert r.state == {"a": "t3", "b": None, "c": "t5"} and r.ops == 5
    assert [op.kind for op in r.unsure] == ["add", "delete"] and r.unsure_ids() == {"c", "d"}
    assert r.allowed("c") == {"t5", None} and r.allowed("d") == {None, "t6"}
    assert r.allowed("a") == {"t3"} and r.allowed("b") == {None}
    assert r.tokens == {"a": ["t1", "t3"], "b": ["t2"], "d": ["t6"], "c": ["t4", "t5"]}


def test_worker_race_with_rowid_reuse_keeps_every_chunk_embeddable(tmp_path: Path) -> None:
    """The embedding worker reads the queue, then an agent updates (or deletes and re-adds) the
    document written last before the worker stores its vectors. SQLite re-uses the highest rowid
    after a delete (an update's new rows take fresh ones, a delete then a new write re-uses it), so
    the new chunk gets the old chunk's rowid; ``store_vectors`` then sees a
    text_hash mismatch and skips the vector — but it has already deleted the queue entry, which now
    belongs to the new chunk. The chunk is in the BM25 leg and never in the dense leg."""
    with Memory(tmp_path / "race.db", embedder="hash", auto_embed=False) as mem:
        mem.add("an older note about connection pools", id="old")
        mem.add("first version of the note: alpha", id="x")
        rows = mem.store.pending(16)  # what embed_pending (the worker) does first...
        mem.delete(["x"])  # ...the agent deletes the note and writes it again meanwhile...
        mem.add("second version of the note: beta", id="x")
        (new_rowid,) = [r for r, d in mem.store.reader.execute("SELECT id, doc_id FROM chunks") if d == "x"]
        assert new_rowid in {r[0] for r in rows}  # the rowid was re-used
        emb = mem.embedders.worker_model
        mem.store.store_vectors([(r[0], r[3], v) for r, v in zip(rows, emb.embed_documents([r[2] for r in rows]))])
        mem.wait_for_vectors()
        c = mem.store.counts(NS)
        assert c["vectors"] == c["chunks"], c  # fails: 1 vector for 2 chunks, 0 pending
        hits = mem.search("second version of the note: beta", mode="vector", top_k=1).results
        assert hits[0].doc_id == "x"
