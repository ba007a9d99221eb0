"""The child process of tests/faults/test_faults_crash.py: ingests into a hybridmem store until it is killed.

    python tests/crash_child.py DB LOG SEED

It opens ``Memory(DB)`` with the deterministic ``hash`` test embedder and the background embedding
worker on (``auto_embed=True``), then loops over random writes: single adds, batched adds (one or
several transactions), updates, deletes, and explicit ``embed_pending`` calls. Every write is
logged to LOG around its commit, each line flushed and fsynced::

    I add <id>=<token> <id>=<token> ...    intent, before the write starts
    I update <id>=<token>                  (the new token of the document)
    I delete <id>
    A                                      the write above returned: it is committed (acknowledged)
    R <seed>                               a new run (process) starts on the same store and log

Within a run writes are sequential, so only the last intent of a run can lack its ``A`` (the write
the kill interrupted); the documents it touched stay "either state" for good, and later runs never
write them again. Every document holds one token that no other document holds (``uq<seed>x<n>z``),
so a BM25 search for it must return it.

Stdout: ``imported`` once the package is imported, ``ready`` once the store is open.
"""

from __future__ import annotations

import os
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path

WORDS = (
    "pool cache timeout billing replica shard index vacuum lock queue retry backoff latency gateway "
    "connection postgres worker cluster failover snapshot"
).split()


@dataclass
class Op:
    kind: str  # add | update | delete
    items: list[tuple[str, str | None]]  # (doc id, token) ; token None for delete
    acked: bool = False


@dataclass
class Replay:
    """The state a log implies: documents acknowledged (id -> current token, None once deleted),
    every token a document ever had, and the unacknowledged last write, if any."""

    state: dict[str, str | None] = field(default_factory=dict)
    tokens: dict[str, list[str]] = field(default_factory=dict)
    #: the writes a kill interrupted (at most one per run): committed or not, nobody knows
    unsure: list[Op] = field(default_factory=list)
    ops: int = 0

    def allowed(self, doc_id: str) -> set[str | None]:
        """The states the store may hold for ``doc_id``: the acknowledged one, and, when an
        interrupted write touched it, its new state too."""
        out: set[str | None] = {self.state.get(doc_id)}
        for op in self.unsure:
            out.update(tok for i, tok in op.items if i == doc_id)
        return out

    def unsure_ids(self) -> set[str]:
        return {i for op in self.unsure for i, _ in op.items}


def replay(log: Path) -> Replay:
    r = Replay()
    if not log.exists():
        return r
    text = log.read_text()
    lines = text.split("\n")
    if not text.endswith("\n"):
        lines = lines[:-1]  # a line cut by the kill is ignored (it can only be the last one)
    last: Op | None = None
    for line in lines:
        if not line:
            continue
        if line.startswith("R "):
            if last is not None and not last.acked:
                r.unsure.append(last)
            last = None
            continue
        if line == "A":
            assert last is not None and not last.acked, f"stray ack in {log}"
            last.acked = True
            r.ops += 1
            for doc_id, tok in last.items:
                r.state[doc_id] = tok
            continue
        kind, *rest = line.split(" ")[1:]
        assert line.startswith("I ") and kind in ("add", "update", "delete"), f"bad log line {line!r}"
        assert last is None or last.acked, f"two unacknowledged intents in {log}"
        items = [(x.split("=")[0], x.split("=")[1]) if "=" in x else (x, None) for x in rest]
        last = Op(kind, items)
        for doc_id, tok in items:
            if tok is not None:
                r.tokens.setdefault(doc_id, []).append(tok)
    if last is not None and not last.acked:
        r.unsure.append(last)
    return r


def doc_text(doc_id: str, token: str, rng: random.Random) -> str:
    # 5-60 filler words: with chunk_size=200 some documents are one chunk, others two to four
    filler = " ".join(rng.choices(WORDS, k=rng.randint(5, 60)))
    return f"Note {doc_id} records that {token} was observed. {filler}."


def main() -> None:
    db, log_path, seed = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    from hybridmem import Memory

    print("imported", flush=True)
    rng = random.Random(seed)
    known = replay(log_path)
    mem = Memory(db, embedder="hash", auto_embed=True, chunk_size=200, chunk_overlap=20)
    print("ready", flush=True)
    log = open(log_path, "a")

    def record(line: str) -> None:
        log.write(line + "\n")
        log.flush()
        os.fsync(log.fileno())

    record(f"R {seed}")

    # documents this process may update or delete: acknowledged and alive, and not touched by a
    # write a kill interrupted (their state is unknown)
    unsure = known.unsure_ids()
    alive = [i for i, t in known.state.items() if t is not None and i not in unsure]
    last_written: set[str] = set()
    n = 0

    def new_id() -> tuple[str, str]:
        nonlocal n
        n += 1
        return f"r{seed}n{n}", f"uq{seed}x{n}z"

    for _ in range(20_000):  # bounded: the parent kills it long before
        r = rng.random()
        # never update or delete the document written last: it holds the highest chunk rowids, and
        # re-using them while the worker embeds the old text loses the new chunks' queue entries
        # (a known bug, see test_worker_race_with_rowid_reuse_keeps_every_chunk_embeddable)
        targets = [i for i in alive if i not in last_written]
        if r < 0.55 or (r < 0.9 and not targets):
            doc_id, tok = new_id()
            record(f"I add {doc_id}={tok}")
            mem.add(doc_text(doc_id, tok, rng), id=doc_id, metadata={"seed": seed, "n": n})
            record("A")
            alive.append(doc_id)
            last_written = {doc_id}
        elif r < 0.7:
            items = [new_id() for _ in range(rng.randint(2, 6))]
            record("I add " + " ".join(f"{i}={t}" for i, t in items))
            # batch_size 2: several transactions in one call, so a kill can land between them
            mem.add_documents(
                [{"id": i, "text": doc_text(i, t, rng), "metadata": {"seed": seed}} for i, t in items],
                batch_size=rng.choice([2, 64]),
            )
            record("A")
            alive += [i for i, _ in items]
            last_written = {i for i, _ in items}
        elif r < 0.82:
            doc_id = rng.choice(targets)
            _, tok = new_id()
            record(f"I update {doc_id}={tok}")
            mem.update(doc_id, doc_text(doc_id, tok, rng))
            record("A")
            last_written = {doc_id}
        elif r < 0.9:
            doc_id = rng.choice(targets)
            record(f"I delete {doc_id}")
            found = mem.delete([doc_id])
            assert found == [doc_id], found
            record("A")
            alive.remove(doc_id)
        else:
            mem.embed_pending(limit=rng.choice([4, 16, 64]))  # the main thread embeds too, racing the worker
    mem.close()


if __name__ == "__main__":
    main()
