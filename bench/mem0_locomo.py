"""Mem0 against hybridmem on LoCoMo: the same questions, each searched only in its own conversation.

What it measures, per system: retrieval quality of the evidence turns (nDCG@10, Recall@5/10/100,
MRR@10; ``hybridmem.eval.metrics``) overall, per LoCoMo category and over the time-constrained
questions apart (``Dataset.tags``); build time (every turn stored and searchable); query latency
p50/p95 (one ``search`` of top 10 at a time, from one thread, after 10 warm-up questions); paired
randomization and bootstrap p-values of hybridmem (this commit) against each other system on nDCG@10.

    python -m bench mem0_locomo --limit 50                 # first 50 questions (only their conversations), to /tmp
    python -m bench mem0_locomo                            # all questions -> bench/results/mem0-locomo/<date>.json
    python -m bench mem0_locomo --systems hybridmem,mem0   # a subset
    python -m bench mem0_locomo --extra-pythonpath DIR     # where fastembed is, for mem0-bm25, if not in the venv
    python -m bench mem0_locomo --report bench/results/mem0-locomo/<date>.json   # re-print a run

Needs ``pip install -e '.[bench]'`` (mem0ai==2.2.1), ``git worktree add /tmp/hm-pre 4e2ea30`` and the
e5 vectors in /tmp/locomo-cache (``hybridmem eval <locomo.json> --cache-dir /tmp/locomo-cache``).
Systems, each in its own subprocess, fed the turns and questions on stdin (the data, CC BY-NC, is
read from shared/ and never copied):

* ``hybridmem``: ``hybridmem.Memory`` of this commit in a temporary SQLite file, ``add_documents`` of
  the loader's turns as they are (text, the turn before as index-only ``context``, occurred_at,
  metadata user_id / session_id / turn / speaker), ``search`` with ``mode="hybrid"``, default params
  (the time leg included) and ``user_id=<conversation>``.
* ``hybridmem-nocontext``: the same without ``context``: the turn's text alone is indexed and embedded.
* ``hybridmem-pre``: the commit before the agent-memory work (4e2ea30, run with
  ``PYTHONPATH=/tmp/hm-pre/src``): each turn a plain document (same text, metadata ``{"conv": id}``),
  each question ``mode="hybrid"`` with ``metadata_filter={"conv": id}`` (it has no user_id scope).
* ``mem0``: ``mem0.Memory.from_config`` on a local Qdrant (``path=`` in a temporary folder:
  qdrant-client's embedded mode), history in a temporary SQLite file, telemetry off
  (``MEM0_TELEMETRY=False`` before the import). One ``add(text, user_id=<conversation>,
  metadata={"conv", "dia_id"}, infer=False)`` per turn: no LLM extracts facts, the turn is the memory.
  ``search(text, top_k=10, filters={"user_id": <conversation>})`` (mem0 2.x refuses a top-level
  ``user_id`` in search). The config names OpenAI for the LLM and the embedder because mem0 accepts
  no other way in; both point to a closed loopback port and are replaced after construction (the
  embedder by the one below, the LLM by an object that raises if called). Installed without extras,
  mem0 ranks by vector similarity alone: it logs that BM25 needs ``fastembed`` and its lemmatizer
  spaCy (both recorded in the JSON); entity boosts need memories added with ``infer=True`` anyway.
* ``mem0-bm25``: the same with mem0's BM25 scoring on (fastembed installed): the encoder mem0 builds,
  ``SparseTextEmbedding("Qdrant/bm25")``, fetches files from the Hugging Face Hub and fails offline,
  so it is built from an empty local folder: fastembed's stemmer, no stopword list.

Every child refuses any non-loopback network connection and reports the attempts.

The vectors are shared: every system embeds through ``hybridmem.embed.cache.CachedEmbedder`` over
``create_embedder("e5")`` (multilingual-e5-small, 4-bit) and ``/tmp/locomo-cache/embeddings.db``;
Mem0's "add" embeddings are passages, its "search" embeddings queries. The turn texts and questions
are the same for all, so all but ``hybridmem`` get identical vectors; ``hybridmem`` embeds each turn
with its context (the loader's documents), ``hybridmem-nocontext`` isolates that. The children report
cache misses by turn or question id (a miss runs the model inside a timed call) and the machine's
load while each system ran (other processes on the 2 cores distort latency).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
DATA = ROOT.parent / "shared" / "data" / "agentmem" / "locomo" / "locomo-shared.json"
CACHE = Path("/tmp/locomo-cache/embeddings.db")
PRE_COMMIT = "4e2ea30"
PRE_TREE = Path("/tmp/hm-pre")
OUT_DIR = BENCH / "results" / "mem0-locomo"
LABELS = {
    "hybridmem": "hybridmem (this commit)",
    "hybridmem-nocontext": "hybridmem (this commit, no context)",
    "hybridmem-pre": f"hybridmem (pre-change, {PRE_COMMIT})",
    "mem0": "Mem0 (infer=False, Qdrant local)",
    "mem0-bm25": "Mem0 + BM25 (fastembed, no stopwords)",
}
TOP_K = 10
DEEP = 100  # a second, untimed search for Recall@100
WARMUP = 10
METRICS = ("ndcg@10", "recall@5", "recall@10", "recall@100", "mrr@10")
CATEGORY_ORDER = ("all", "single-hop", "multi-hop", "temporal", "open-domain", "adversarial", "time-constrained")
RESULT_MARK = "@@mem0-locomo-result@@ "


# --------------------------------------------------------------------------------------- child side
def _guard_network() -> list[str]:
    """Refuse every connection that leaves the machine; the refused addresses are returned (live list)."""
    import socket

    attempts: list[str] = []
    connect = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6) and str(address[0]) not in ("127.0.0.1", "::1"):
            attempts.append(str(address))
            raise OSError(f"mem0_locomo: network connection refused ({address})")
        return connect(self, address)

    socket.socket.connect = guarded  # type: ignore[method-assign]
    return attempts


class _ModelCalls:
    """Wraps the model behind the cache: records each text that missed it (and so ran e5 in the call)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.texts: list[tuple[str, str]] = []

    def embed_documents(self, texts: Any) -> Any:
        self.texts += [("passage", t) for t in texts]
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> Any:
        self.texts.append(("query", text))
        return self.inner.embed_query(text)


def _embedder() -> Any:
    from hybridmem.embed.cache import CachedEmbedder
    from hybridmem.embed.registry import create_embedder

    return CachedEmbedder(_ModelCalls(create_embedder("e5")), CACHE)


def _missed(emb: Any, docs: list[dict[str, Any]], queries: list[dict[str, Any]]) -> list[str]:
    """The turns and questions (by id) whose vector was not in the cache; '?' a text that is neither."""
    ids = {("passage", d["text"]): d["id"] for d in docs} | {("query", q["text"]): q["id"] for q in queries}
    return [f"{ids.get((role, t), '?')} ({role}, {len(t)} chars)" for role, t in emb.inner.texts]


def _ranking(resp: Any) -> list[str]:
    return list(dict.fromkeys(r.doc_id for r in resp.results))


class HybridmemPeer:
    """hybridmem of this commit: the loader's turns as they are, searched in the conversation's scope."""

    notes = (
        "Memory(temp SQLite, chunk_size=None, auto_embed=False); add_documents(turns, batch_size=512) + "
        "embed_pending() in build time; search(mode='hybrid', top_k, user_id=conv), default hybrid_params "
        "(time_weight=1: the time leg runs when the question names a time that narrows the scope)"
    )

    def __init__(self, workdir: Path) -> None:
        from hybridmem import Memory

        self.emb = _embedder()
        self.mem = Memory(workdir / "hybridmem.db", embedder=self.emb, chunk_size=None, auto_embed=False)

    def build(self, docs: list[dict[str, Any]]) -> None:
        self.mem.add_documents(docs, batch_size=512)
        self.mem.embed_pending()

    def search(self, text: str, conv: str, k: int) -> list[str]:
        resp = self.mem.search({"search_text": text, "top_k": k, "mode": "hybrid", "user_id": conv})
        bad = [f"{n} {r.status}" for n, r in resp.legs.items() if r.status in ("error", "timeout")]
        if bad:
            raise RuntimeError(f"hybridmem legs failed: {bad}")
        return _ranking(resp)


class HybridmemNoContextPeer(HybridmemPeer):
    """hybridmem of this commit with the turns as plain messages: no index-only ``context`` (the turn before,
    which the loader adds since 0f44ec5), so its vectors are exactly those Mem0 and the pre-change commit get."""

    notes = HybridmemPeer.notes + "; each turn without its 'context' field (vectors of the turn's text alone)"

    def build(self, docs: list[dict[str, Any]]) -> None:
        super().build([{k: v for k, v in d.items() if k != "context"} for d in docs])


class HybridmemPrePeer(HybridmemPeer):
    """hybridmem before the agent-memory work: plain documents, a metadata filter on the conversation."""

    notes = (
        f"commit {PRE_COMMIT} (PYTHONPATH={PRE_TREE}/src): Memory(temp SQLite, chunk_size=None, auto_embed=False); "
        "each turn {id, text, metadata: {conv}}; add_documents(batch_size=512) + embed_pending(); "
        "search(mode='hybrid', top_k, metadata_filter={'conv': conv}), default hybrid_params"
    )

    def build(self, docs: list[dict[str, Any]]) -> None:
        plain = [{"id": d["id"], "text": d["text"], "metadata": {"conv": d["metadata"]["user_id"]}} for d in docs]
        self.mem.add_documents(plain, batch_size=512)
        self.mem.embed_pending()

    def search(self, text: str, conv: str, k: int) -> list[str]:
        resp = self.mem.search({"search_text": text, "top_k": k, "mode": "hybrid", "metadata_filter": {"conv": conv}})
        bad = [f"{n} {r.status}" for n, r in resp.legs.items() if r.status in ("error", "timeout")]
        if bad:
            raise RuntimeError(f"hybridmem legs failed: {bad}")
        return _ranking(resp)


class _E5ForMem0:
    """mem0's embedding interface (``embed(text, memory_action)``, ``embed_batch``) over hybridmem's cached
    e5: "add" and "update" are passages, "search" is a query. mem0 strips a question before embedding it
    (one LoCoMo question ends in a space): ``original`` maps it back to the text the other systems embed."""

    def __init__(self, emb: Any) -> None:
        self.emb = emb
        self.original: dict[str, str] = {}

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        text = self.original.get(text, text)
        if memory_action == "search":
            return self.emb.embed_query(text).tolist()
        return self.emb.embed_documents([text])[0].tolist()

    def embed_batch(self, texts: list[str], memory_action: str = "add") -> list[list[float]]:
        return [self.embed(t, memory_action) for t in texts]


class _NoLLM:
    """Stands in for mem0's LLM: with infer=False nothing may call it."""

    def generate_response(self, *args: Any, **kwargs: Any) -> str:
        raise RuntimeError("mem0 called its LLM although every add is infer=False")


class Mem0Peer:
    notes = (
        "mem0.Memory.from_config: vector_store qdrant (local path, embedding_model_dims=384), history_db_path in "
        "the temp folder, MEM0_TELEMETRY=False, MEM0_DIR=temp; embedder and LLM configured as OpenAI on a "
        "closed loopback port and replaced after construction (embedder: hybridmem's cached e5, passages for "
        "'add', queries for 'search'; LLM: raises if called). add(turn text, user_id=conv, metadata={conv, "
        "dia_id}, infer=False) per turn; search(text, top_k, filters={'user_id': conv}), threshold 0.1 (default)"
    )

    def __init__(self, workdir: Path) -> None:
        os.environ["MEM0_TELEMETRY"] = "False"
        os.environ["MEM0_DIR"] = str(workdir / "mem0-home")
        os.environ["HF_HUB_OFFLINE"] = "1"  # a fastembed, if installed, looks for Qdrant/bm25 once, not thrice
        from mem0 import Memory

        dummy = {"api_key": "unused-offline", "openai_base_url": "http://127.0.0.1:9/v1"}
        cfg = {
            "vector_store": {
                "provider": "qdrant",
                "config": {"collection_name": "locomo", "path": str(workdir / "qdrant"), "embedding_model_dims": 384},
            },
            "embedder": {"provider": "openai", "config": {**dummy, "embedding_dims": 384}},
            "llm": {"provider": "openai", "config": dummy},
            "history_db_path": str(workdir / "mem0-history.db"),
        }
        self.mem = Memory.from_config(cfg)
        self.emb = _embedder()
        self.e5 = _E5ForMem0(self.emb)
        self.mem.embedding_model = self.e5
        self.mem.llm = _NoLLM()

    def build(self, docs: list[dict[str, Any]]) -> None:
        for d in docs:
            conv, dia = d["id"].split(":", 1)
            self.mem.add(d["text"], user_id=conv, metadata={"conv": conv, "dia_id": dia}, infer=False)

    def search(self, text: str, conv: str, k: int) -> list[str]:
        self.e5.original[text.strip()] = text
        res = self.mem.search(text, top_k=k, filters={"user_id": conv})["results"]
        return list(dict.fromkeys(f"{r['metadata']['conv']}:{r['metadata']['dia_id']}" for r in res))


class Mem0Bm25Peer(Mem0Peer):
    """Mem0 with its BM25 keyword scoring on (needs ``fastembed``): the encoder mem0 would build itself,
    ``SparseTextEmbedding("Qdrant/bm25")``, downloads its files from the Hugging Face Hub and fails offline
    ("Could not load model Qdrant/bm25 from any source"); BM25 has no weights, so it is built here from an
    empty local folder (``specific_model_path``): Snowball English stemming as shipped, but no stopword list
    (the list is one of those files; spaCy's stopwords and lemmas need ``en_core_web_sm``, not installed)."""

    notes = Mem0Peer.notes + (
        "; BM25 on: vector_store._bm25_encoder = fastembed SparseTextEmbedding('Qdrant/bm25', "
        "specific_model_path=<empty folder>) (Snowball stemmer, no stopwords), set before the first add"
    )

    def __init__(self, workdir: Path) -> None:
        os.environ["FASTEMBED_CACHE_PATH"] = str(workdir / "fastembed")
        try:
            from fastembed import SparseTextEmbedding
        except ImportError:
            raise SystemExit("mem0-bm25 needs fastembed: pip install fastembed==0.9.1") from None
        super().__init__(workdir)
        (workdir / "bm25").mkdir()
        store = self.mem.vector_store
        store._bm25_encoder = SparseTextEmbedding("Qdrant/bm25", specific_model_path=str(workdir / "bm25"))
        if not store._has_bm25_slot:
            raise SystemExit("mem0's Qdrant collection has no 'bm25' sparse slot")


PEERS = {
    "hybridmem": HybridmemPeer,
    "hybridmem-nocontext": HybridmemNoContextPeer,
    "hybridmem-pre": HybridmemPrePeer,
    "mem0": Mem0Peer,
    "mem0-bm25": Mem0Bm25Peer,
}


def _versions(system: str) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    import hybridmem

    src = Path(hybridmem.__file__).parent.parent
    head = subprocess.run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    out = {"python": platform.python_version(), "hybridmem_src": str(src), "hybridmem_commit": head.stdout.strip()}
    for pkg in ("numpy", "mem0ai", "qdrant-client", "fastembed") if system.startswith("mem0") else ("numpy",):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def _warnings_of(system: str) -> tuple[Any, list[str]]:
    """A handler collecting the library's WARNING+ log lines (mem0 says there what it turned off)."""
    import logging

    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            msg = f"{record.name}: {record.getMessage()}"
            if msg not in lines:
                lines.append(msg)

    h = Keep(logging.WARNING)
    logging.getLogger("mem0" if system.startswith("mem0") else "hybridmem").addHandler(h)
    return h, lines


def run_child(system: str) -> dict[str, Any]:
    import numpy as np

    attempts = _guard_network()
    _, warned = _warnings_of(system)
    payload = json.load(sys.stdin)
    docs, queries = payload["docs"], payload["queries"]
    out: dict[str, Any] = {"system": system, "label": LABELS[system], "docs": len(docs), "queries": len(queries)}
    with tempfile.TemporaryDirectory(prefix=f"mem0-locomo-{system}-") as wd:
        t = time.perf_counter()
        peer = PEERS[system](Path(wd))
        out["open_s"] = round(time.perf_counter() - t, 3)
        out["notes"] = peer.notes
        t = time.perf_counter()
        peer.build(docs)
        out["build_s"] = round(time.perf_counter() - t, 3)
        for q in queries[:WARMUP]:  # loads lazily built structures (BM25 postings, the dense matrix)
            peer.search(q["text"], q["conv"], TOP_K)
        runs: dict[str, list[str]] = {}
        deep: dict[str, list[str]] = {}
        lat: list[float] = []
        for q in queries:
            t = time.perf_counter()
            runs[q["id"]] = peer.search(q["text"], q["conv"], TOP_K)
            lat.append((time.perf_counter() - t) * 1000)
            deep[q["id"]] = peer.search(q["text"], q["conv"], DEEP)
        a = np.asarray(lat)
        out["latency_ms"] = {
            "p50": round(float(np.percentile(a, 50)), 3),
            "p95": round(float(np.percentile(a, 95)), 3),
            "mean": round(float(a.mean()), 3),
            "n": len(lat),
        }
        out["embedding_cache"] = {"hits": peer.emb.hits, "misses": peer.emb.misses}
        out["embedding_cache"]["missed"] = _missed(peer.emb, docs, queries)[:50]
    out["network_attempts"] = list(attempts)
    out["warnings"] = warned
    out["versions"] = _versions(system)
    out["runs"], out["deep"] = runs, deep
    return out


# --------------------------------------------------------------------------------------- parent side
def _payload(limit: int | None) -> tuple[Any, list[str], str]:
    """The dataset, the questions measured (the first ``limit``) and the children's input: the turns of
    the conversations those questions ask about, and the questions with their conversation."""
    from hybridmem.eval.datasets import load_dataset

    ds = load_dataset(str(DATA))
    qids = list(ds.queries)[:limit] if limit else list(ds.queries)
    convs = {ds.scopes[q]["user_id"] for q in qids}
    docs = [d for d in ds.docs if d["metadata"]["user_id"] in convs]
    queries = [{"id": q, "text": ds.queries[q], "conv": ds.scopes[q]["user_id"]} for q in qids]
    return ds, qids, json.dumps({"docs": docs, "queries": queries})


def _spawn(system: str, stdin: str, timeout: float, extra_path: list[str]) -> dict[str, Any]:
    env = dict(os.environ)
    if system == "hybridmem-pre":
        if not (PRE_TREE / "src" / "hybridmem").is_dir():
            return {"system": system, "error": f"no {PRE_TREE}: run `git worktree add {PRE_TREE} {PRE_COMMIT}`"}
        env["PYTHONPATH"] = str(PRE_TREE / "src")
    else:
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), *(extra_path if system == "mem0-bm25" else [])])
    cmd = [sys.executable, __file__, "--child", system]
    try:
        p = subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"system": system, "error": f"not done after {timeout:.0f} s"}
    line = next((x for x in reversed(p.stdout.splitlines()) if x.startswith(RESULT_MARK)), None)
    if p.returncode != 0 or line is None:
        sys.stderr.write(p.stderr[-4000:])
        tail = (p.stderr or p.stdout).strip().splitlines()
        return {"system": system, "error": (tail[-1] if tail else f"exit {p.returncode}")[:400]}
    return json.loads(line[len(RESULT_MARK) :])


class _Watch:
    """Samples, every 5 s while a system runs, the 1-minute load and whether a ``hybridmem eval`` runs too
    (another process on the 2 cores distorts latency; the JSON says so)."""

    def __init__(self) -> None:
        import threading

        self.load: list[float] = []
        self.evals = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(5.0):
            self.load.append(os.getloadavg()[0])
            p = subprocess.run(["pgrep", "-f", "hybridmem eval"], capture_output=True, text=True)
            self.evals += bool(p.stdout.strip())

    def __enter__(self) -> _Watch:
        self._t.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._t.join()

    def report(self) -> dict[str, Any]:
        return {"samples": len(self.load), "load1_max": max(self.load, default=None), "samples_with_eval": self.evals}


def _score(ds: Any, qids: list[str], r: dict[str, Any]) -> dict[str, dict[str, float]]:
    from hybridmem.eval.metrics import per_query

    scores = {}
    for q in qids:
        s = per_query(r["runs"][q], ds.qrels[q])
        s["recall@100"] = per_query(r["deep"][q], ds.qrels[q])["recall@100"]
        scores[q] = {m: s[m] for m in METRICS}
    return scores


def _metrics(ds: Any, scores: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    from hybridmem.eval.metrics import means_by_category

    out = means_by_category(scores, ds.categories)
    tagged = {q: s for q, s in scores.items() if "time-constrained" in ds.tags.get(q, ())}
    if tagged:
        out["time-constrained"] = means_by_category(tagged)["all"]
    return {c: {k: round(v, 4) if k != "queries" else int(v) for k, v in m.items()} for c, m in out.items()}


def _compare(ds: Any, per: dict[str, dict[str, dict[str, float]]], seed: int) -> list[dict[str, Any]]:
    """hybridmem (this commit) against each other system, paired over the same questions."""
    from hybridmem.eval.metrics import paired_test

    out: list[dict[str, Any]] = []
    if "hybridmem" not in per:
        return out
    ref = per["hybridmem"]
    for other, sc in per.items():
        if other == "hybridmem":
            continue
        for subset in ("all", "time-constrained"):
            qids = [q for q in ref if subset == "all" or "time-constrained" in ds.tags.get(q, ())]
            if not qids:
                continue
            res = paired_test([ref[q]["ndcg@10"] for q in qids], [sc[q]["ndcg@10"] for q in qids], seed=seed)
            res = {k: [round(x, 4) for x in v] if k == "ci95" else round(v, 5) for k, v in res.items()}
            out.append({"a": "hybridmem", "b": other, "metric": "ndcg@10", "questions": subset, **res})
    return out


def _env() -> dict[str, Any]:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    return {
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "git": git("rev-parse", "--short", "HEAD"),
        "git_dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
    }


def run(a: argparse.Namespace) -> dict[str, Any]:
    systems = [s.strip() for s in a.systems.split(",") if s.strip()]
    unknown = [s for s in systems if s not in PEERS]
    if unknown:
        raise SystemExit(f"unknown systems {unknown}; choose from {', '.join(PEERS)}")
    res: dict[str, Any] = {"env": _env()}
    ds, qids, stdin = _payload(a.limit)
    res["dataset"] = {
        "path": str(DATA),
        "fingerprint": ds.fingerprint,
        "questions": len(qids),
        "questions_total": len(ds.queries),
        "time_constrained": sum(1 for q in qids if "time-constrained" in ds.tags.get(q, ())),
        "turns": len(json.loads(stdin)["docs"]),
        "conversations": len({ds.scopes[q]["user_id"] for q in qids}),
    }
    res["config"] = {"top_k": TOP_K, "deep": DEEP, "warmup": WARMUP, "embedder": "e5 via CachedEmbedder"}
    res["config"]["embedding_cache"] = str(CACHE)
    res["systems"], per = {}, {}
    for s in systems:
        print(f"running {s} ...", file=sys.stderr, flush=True)
        t = time.perf_counter()
        with _Watch() as w:
            r = _spawn(s, stdin, a.timeout, [p for p in a.extra_pythonpath.split(os.pathsep) if p])
        r["wall_s"] = round(time.perf_counter() - t, 1)
        r["machine_during_run"] = w.report()
        if "error" not in r:
            per[s] = _score(ds, qids, r)
            r["metrics"] = _metrics(ds, per[s])
            del r["runs"], r["deep"]
        res["systems"][s] = r
    res["paired"] = _compare(ds, per, a.seed)
    res["env"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    res["env"]["git_end"] = _env()["git"]  # another commit landing mid-run would change what "this commit" ran
    return res


# --------------------------------------------------------------------------------------- report
def _table(rows: list[list[Any]]) -> None:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    for j, row in enumerate(rows):
        print("  ".join(str(c).ljust(w) if i < 2 else str(c).rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
        if j == 0:
            print("  ".join("-" * w for w in widths))


def print_report(res: dict[str, Any]) -> None:
    env, ds = res["env"], res["dataset"]
    print(
        f"\nMem0 vs hybridmem on LoCoMo ({env['started']}, commit {env['git']}{' +dirty' if env['git_dirty'] else ''}"
        f"{' -> ' + env['git_end'] if env.get('git_end', env['git']) != env['git'] else ''}, "
        f"{env['cpus']} CPUs, load avg {env['loadavg_start']} -> {env.get('loadavg_end')})\n"
        f"{ds['questions']} of {ds['questions_total']} questions ({ds['time_constrained']} time-constrained), "
        f"{ds['turns']} turns in {ds['conversations']} conversations; each question searched in its own "
        f"conversation; same e5 vectors (hybridmem this commit: each turn embedded with its context)\n"
    )
    ok = {s: r for s, r in res["systems"].items() if "error" not in r}
    rows: list[list[Any]] = [["category", "system", "n", "nDCG@10", "R@5", "R@10", "R@100", "MRR@10"]]
    cats = [c for c in CATEGORY_ORDER if any(c in r["metrics"] for r in ok.values())]
    for c in cats:
        for s, r in ok.items():
            m = r["metrics"].get(c)
            if m:
                rows.append([c, r["label"], m["queries"], *(f"{m[k]:.4f}" for k in METRICS)])
    _table(rows)
    print()
    rows = [["system", "", "build s", "p50 ms", "p95 ms", "mean ms", "cache miss", "net", "max load", "eval seen"]]
    for s, r in res["systems"].items():
        if "error" in r:
            rows.append([s, "ERROR: " + r["error"][:120], *[""] * 8])
            continue
        lat = r["latency_ms"]
        net = len(r.get("network_attempts", []))
        mach = r.get("machine_during_run", {})
        row = [r["label"], "", r["build_s"], lat["p50"], lat["p95"], lat["mean"], r["embedding_cache"]["misses"], net]
        rows.append([*row, mach.get("load1_max", ""), mach.get("samples_with_eval", "")])
    _table(rows)
    if res.get("paired"):
        print("\npaired tests on nDCG@10 (hybridmem this commit − other; 10,000 resamples):")
        rows = [["vs", "questions", "n", "Δ mean", "95% CI", "p randomization", "p bootstrap"]]
        for p in res["paired"]:
            label = res["systems"][p["b"]]["label"]
            ci = f"[{p['ci95'][0]:+.4f}, {p['ci95'][1]:+.4f}]"
            rows.append(
                [
                    label,
                    p["questions"],
                    p["queries"],
                    f"{p['mean_diff']:+.4f}",
                    ci,
                    p["p_randomization"],
                    p["p_bootstrap"],
                ]
            )
        _table(rows)
    for s, r in ok.items():
        if r.get("warnings"):
            print(f"\n{r['label']} logged: " + " | ".join(w[:160] for w in r["warnings"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=None, help="only the first N questions (and their conversations)")
    ap.add_argument("--systems", default=",".join(PEERS))
    ap.add_argument(
        "--extra-pythonpath",
        default="",
        help="added to mem0-bm25's PYTHONPATH (where fastembed is, if not in the venv)",
    )
    ap.add_argument("--out", type=Path, help="JSON path (default: results/mem0-locomo/<date>.json; /tmp with --limit)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per system")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--report", type=Path, help="re-print an earlier run's JSON")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(RESULT_MARK + json.dumps(run_child(a.child)), flush=True)
        return
    if a.report:
        print_report(json.loads(a.report.read_text()))
        return
    res = run(a)
    day = datetime.now(timezone.utc).date().isoformat()
    # a partial run (--limit) is a development run: kept out of bench/results unless --out says otherwise
    out = a.out or (
        Path(tempfile.gettempdir()) / f"mem0-locomo-{day}-limit{a.limit}.json" if a.limit else OUT_DIR / f"{day}.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2) + "\n")
    print_report(res)
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    main()
