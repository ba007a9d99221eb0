"""Helpers the benchmarks share: the synthetic technical corpus and its queries (seeded, so every
run and every script sees the same text), the look-up embedders (vectors without a model), child
processes that print JSON, RSS and percentiles. Moved from bench/latency.py, which defined them first.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

DIM = 384
NS = "default"
SEED = 20240601
N_SERVICES = 20
ENVIRONMENTS = ("production", "staging", "dev")

# --------------------------------------------------------------------------- synthetic corpus
EN_WORDS = """
database connection pool timeout latency replica primary failover query index cache eviction
memory leak heap garbage collector thread deadlock lock contention queue consumer producer broker
partition offset retry backoff circuit breaker gateway proxy load balancer upstream downstream
certificate expiry rotation secret vault token session cookie login authentication authorization
permission role policy firewall port socket handshake packet throughput bandwidth disk volume
snapshot backup restore migration schema rollback deploy release canary rollout cluster node pod
container image registry scheduler cron job worker batch pipeline stream event webhook callback
endpoint request response header payload serialization json parser encoder buffer overflow
exception stacktrace error warning alert incident outage postmortem runbook oncall escalation
dashboard metric histogram percentile counter gauge trace span sampling log aggregation retention
quota limit throttling ratelimit burst spike saturation cpu utilization autoscaler replica shard
rebalance compaction vacuum checkpoint transaction isolation commit journal wal fsync durability
dns resolver ttl record cdn origin tls cipher upgrade patch kernel driver firmware hotfix regression
feature flag toggle config setting parameter default override environment variable staging billing
invoice payment refund customer account tenant subscription search ranking embedding vector model
inference gpu training dataset label annotation evaluation accuracy recall precision benchmark
slow fast stuck crashed restarted degraded healthy unhealthy unreachable exhausted saturated
increased decreased misconfigured rotated expired corrupted throttled dropped duplicated delayed
""".split()
EN_GLUE = """the a an of to in for on with after before during when because while and but or
is was were has have had been not no this that it its from by at as under over into""".split()

FR_WORDS = """
base données connexion délai latence réplique primaire bascule requête index cache mémoire fuite
tas ramasse-miettes fil verrou contention file consommateur producteur courtier partition décalage
tentative disjoncteur passerelle mandataire répartiteur charge certificat expiration rotation
secret jeton session authentification autorisation droit politique pare-feu port prise débit
disque volume instantané sauvegarde restauration migration schéma retour déploiement version
grappe nœud conteneur image registre planificateur tâche travailleur lot flux événement rappel
point terminaison réponse en-tête analyseur tampon débordement exception erreur avertissement
alerte incident panne bilan procédure astreinte tableau métrique histogramme compteur trace
échantillonnage journal conservation quota limite étranglement pic saturation processeur
utilisation fragment compactage transaction isolation validation résolveur enregistrement
chiffrement correctif noyau pilote régression paramètre défaut environnement facturation facture
paiement remboursement client compte abonnement recherche classement vecteur modèle inférence
entraînement évaluation précision rappel lent rapide bloqué planté redémarré dégradé sain
injoignable épuisé saturé augmenté diminué mal configuré expiré corrompu supprimé dupliqué retardé
""".split()
FR_GLUE = """le la les un une des du de dans pour sur avec après avant pendant quand car et mais
ou est était ont a été ne pas ce cette il elle par au aux sous""".split()

CONFIG_KEYS = """max_connections pool_size idle_timeout statement_timeout work_mem shared_buffers
max_wal_size checkpoint_timeout keepalive_timeout worker_processes max_retries retry_backoff_ms
request_timeout_ms batch_size max_batch_bytes linger_ms session_ttl token_ttl cache_ttl
max_heap_size gc_pause_target read_replicas write_quorum replication_factor min_insync_replicas
fetch_max_bytes max_poll_records heartbeat_interval rate_limit_rps burst_size
""".split()
TICKET_PREFIXES = ("HEL", "OPS", "INC", "SRE", "BIL")
UNITS = ("ms", "s", "MB", "GB", "%", "req/s")


def _identifier(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.45:
        return f"{rng.choice(TICKET_PREFIXES)}-{rng.randint(1000, 9999)}"
    if r < 0.8:
        return rng.choice(CONFIG_KEYS)
    if r < 0.9:
        return f"v{rng.randint(1, 4)}.{rng.randint(0, 12)}.{rng.randint(0, 30)}"
    return f"HTTP {rng.choice((500, 502, 503, 504, 429, 404))}"


def _number(rng: random.Random) -> str:
    return (
        f"{rng.choice((rng.randint(1, 100), rng.randint(100, 10000)))}{rng.choice(UNITS) if rng.random() < 0.6 else ''}"
    )


def make_chunk(rng: random.Random) -> str:
    """30-80 words of incident-note-like text, en (75%) or fr (25%), with identifiers and numbers."""
    fr = rng.random() < 0.25
    words, glue = (FR_WORDS, FR_GLUE) if fr else (EN_WORDS, EN_GLUE)
    n = rng.randint(30, 80)
    out: list[str] = []
    sentence = 0
    while len(out) < n:
        r = rng.random()
        if r < 0.55:
            w = rng.choice(words)
        elif r < 0.8:
            w = rng.choice(glue)
        elif r < 0.9:
            w = _identifier(rng)
        else:
            w = _number(rng)
        if sentence == 0:
            w = w[:1].upper() + w[1:]
        out.append(w)
        sentence += 1
        if sentence >= rng.randint(6, 14):
            out[-1] += "."
            sentence = 0
    text = " ".join(out)
    return text if text.endswith(".") else text + "."


def iter_corpus(n: int, seed: int = SEED) -> Iterator[dict]:
    """The synthetic corpus one document at a time: the first ``m`` of ``iter_corpus(n)`` are
    ``make_corpus(m)`` for any ``m <= n`` (one generator, drawn in order)."""
    rng = random.Random(seed)
    for i in range(n):
        yield {
            "id": f"doc-{i:07d}",
            "text": make_chunk(rng),
            "metadata": {
                "environment": rng.choice(ENVIRONMENTS),
                "service": f"svc-{rng.randrange(N_SERVICES)}",
                "severity": rng.randint(1, 4),
            },
        }


def make_corpus(n: int, seed: int = SEED) -> list[dict]:
    return list(iter_corpus(n, seed))


def make_queries(n: int, seed: int = SEED + 1) -> list[str]:
    """2-6 vocabulary words; 30% also cite an identifier (ticket id, config key, version, HTTP code)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = FR_WORDS if rng.random() < 0.25 else EN_WORDS
        q = [rng.choice(words) for _ in range(rng.randint(2, 6))]
        if rng.random() < 0.3:
            q.insert(rng.randrange(len(q) + 1), _identifier(rng))
        out.append(" ".join(q))
    return out


# --------------------------------------------------------------------------- look-up embedder
class LookupEmbedder:
    """Implements the Embedder protocol without a model: sha256(role, text) seeds a pseudo-random
    unit vector. Deterministic, ~20 µs a text, no semantics. Time spent in it is accumulated."""

    def __init__(self, dim: int = DIM) -> None:
        self.dim = dim
        self.name = f"lookup:{dim}"
        self.seconds = 0.0

    def _vec(self, role: str, text: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(f"{role}\x00{text}".encode()).digest()[:8], "little")
        v = np.random.default_rng(seed).standard_normal(self.dim, dtype=np.float32)
        return v / np.linalg.norm(v)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        t = time.perf_counter()
        out = np.stack([self._vec("passage", x) for x in texts]) if texts else np.zeros((0, self.dim), np.float32)
        self.seconds += time.perf_counter() - t
        return out

    def embed_query(self, text: str) -> np.ndarray:
        return self._vec("query", text)


class BagEmbedder:
    """Structured variant for the HNSW recall check only: sum of per-word hashed random vectors, so
    texts sharing words are neighbours (real embeddings have such structure; i.i.d. random vectors,
    as LookupEmbedder gives, are the worst case for any ANN graph)."""

    def __init__(self, dim: int = DIM) -> None:
        self.dim = dim
        self._cache: dict[str, np.ndarray] = {}

    def _word(self, w: str) -> np.ndarray:
        v = self._cache.get(w)
        if v is None:
            seed = int.from_bytes(hashlib.sha256(w.encode()).digest()[:8], "little")
            v = self._cache[w] = np.random.default_rng(seed).standard_normal(self.dim, dtype=np.float32)
        return v

    def embed(self, text: str) -> np.ndarray:
        v = np.sum([self._word(w) for w in text.lower().replace(".", " ").split()], axis=0)
        return (v / np.linalg.norm(v)).astype(np.float32)


# --------------------------------------------------------------------------- helpers
def child_json(code: str, *args: str) -> dict:
    """Run ``code`` in a fresh Python process with ``args``; the JSON object its last line prints."""
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


#: a child process's ``mem()``: its RSS and the anonymous and file-backed parts, MB (pasted into the
#: code a benchmark runs with :func:`child_json`)
CHILD_MEM = """
def mem():
    out = {}
    for line in open("/proc/self/status"):
        k, _, v = line.partition(":")
        if k in ("VmRSS", "RssAnon", "RssFile"):
            out[k] = int(v.split()[0]) // 1024
    stat = open("/proc/self/stat").read().rpartition(")")[2].split()
    out["minflt"], out["majflt"] = int(stat[7]), int(stat[9])  # page faults so far (major: read from disk)
    return out
"""


def write_report(path: Path, report: dict) -> None:
    """Write a benchmark's results (JSON, indented) to ``path``, its directory made if need be."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1) + "\n")


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def git_commit() -> str:
    """The short commit of the checkout a benchmark runs from (its report's ``commit``)."""
    return subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    ).stdout.strip()


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def pct(xs: Sequence[float], p: float) -> float:
    if not xs:
        return float("nan")
    if len(xs) == 1:
        return float(xs[0])
    return float(statistics.quantiles(xs, n=100, method="inclusive")[int(p) - 1]) if p < 100 else max(xs)


def summary(ms: Sequence[float]) -> dict:
    return {
        "p50_ms": round(statistics.median(ms), 3),
        "p95_ms": round(pct(ms, 95), 3),
        "mean_ms": round(statistics.fmean(ms), 3),
        "n": len(ms),
    }


def file_size(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists())


def rerun(script: str) -> list[str]:
    """The command that runs bench script ``script`` (its ``__file__``) in a fresh process:
    ``python -m bench.<name>`` (the package's imports need the repository root on the path, which the
    parent's working directory or PYTHONPATH gives the child)."""
    return [sys.executable, "-m", f"bench.{Path(script).stem}"]


# --------------------------------------------------------------------------- a large store, built once
def cached_store(n: int, log: bool = True) -> tuple[Path, dict]:
    """An SQLite store of ``n`` synthetic notes (``iter_corpus``: one chunk each, with metadata)
    and a precomputed unit vector each, under the ``hash`` embedder's name (vectors given, so no
    model runs): built once by the fastest bulk path (``add_documents`` in batches of 1,000,
    ``auto_embed=False``) into ``.bench-cache/store-<n>/`` and reused (``bench transfer``, ``bench
    list_page``). Returns the file and the build's record (its write rate: the ingest baseline)."""
    from hybridmem import Memory

    folder = ROOT / ".bench-cache" / f"store-{n}"
    db, meta = folder / "store.db", folder / "build.json"
    if meta.is_file() and db.is_file():
        return db, json.loads(meta.read_text())
    folder.mkdir(parents=True, exist_ok=True)
    for p in folder.iterdir():
        p.unlink()
    rng = np.random.default_rng(SEED)
    t0 = time.perf_counter()
    with Memory(db, embedder="hash", auto_embed=False, chunk_size=None) as m:
        batch: list[dict] = []
        for i, d in enumerate(iter_corpus(n), start=1):
            batch.append(d)
            if len(batch) == 1000 or i == n:
                vecs = rng.standard_normal((len(batch), m.store.embedder_info()[1] or 256), dtype=np.float32)
                vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
                m.add_documents([{**x, "vector": v} for x, v in zip(batch, vecs)], batch_size=1000)
                batch = []
                if log and i % 100_000 == 0:
                    print(f"  built {i:,} of {n:,} ({i / (time.perf_counter() - t0):,.0f} docs/s)", flush=True)
        stats = m.stats()
    took = time.perf_counter() - t0
    rec = {
        "n": n,
        "documents": stats.documents,
        "vectors": stats.vectors,
        "build_s": round(took, 1),
        "add_documents_per_s": round(n / took),
        "built": time.strftime("%Y-%m-%d"),
    }
    meta.write_text(json.dumps(rec, indent=1) + "\n")
    return db, rec


def browser_bench() -> tuple[Any, Any, str]:
    """What a benchmark of the explorer needs: Playwright's ``sync_playwright``, the tests' live
    server class (``tests/server_utils.LiveServer``) and Debian's chromium (exits without it)."""
    import shutil as _shutil

    from playwright.sync_api import sync_playwright

    sys.path.insert(0, str(ROOT / "tests"))
    from server_utils import LiveServer

    chromium = _shutil.which("chromium")
    if chromium is None:
        raise SystemExit("needs Debian's chromium (apt install chromium)")
    return sync_playwright, LiveServer, chromium
