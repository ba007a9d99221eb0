"""Every default in one place. Environment variables use the prefix ``HYBRIDMEM_``."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Settings", "DEFAULT_DB", "DEFAULT_NAMESPACE", "DEFAULT_EMBEDDER", "settings_from_env"]

DEFAULT_DB = Path(".hybridmem") / "memory.db"
DEFAULT_NAMESPACE = "default"
DEFAULT_EMBEDDER = "e5"

# query contract defaults
DEFAULT_TOP_K = 5
MAX_TOP_K = 1000
#: memories per page of Memory.list and GET /v1/memories
MAX_LIST_LIMIT = 1000
#: neighbouring turns a context_window may ask for on each side, and ids in one scope list
MAX_CONTEXT_TURNS = 20
MAX_SCOPE_VALUES = 256
#: characters of a memory's index-only context (Document.context)
MAX_CONTEXT_CHARS = 4096
DEFAULT_RRF_K = 60
MIN_FETCH_K_RERANK = 20
MAX_FETCH_K = 10_000
MAX_QUERY_CHARS = 8_000

# ingest
DEFAULT_CHUNK_SIZE = 1200  # characters (~250 tokens: well inside e5's 512-token window)
DEFAULT_CHUNK_OVERLAP = 150
#: the one size limit of a document: its text as UTF-8 bytes, whether it comes from a file (checked on
#: the file's size before reading it, and on the decoded text), a JSON record, the API or an upload
MAX_DOCUMENT_BYTES = 20 * 1024 * 1024
#: metadata budget of one document (a 422 names the limit): its JSON size, a string value's size,
#: its keys at any level. Every chunk of the document carries it, so it bounds what a write costs
MAX_METADATA_BYTES = 16 * 1024
MAX_METADATA_VALUE_CHARS = 4096
MAX_METADATA_KEYS = 256
#: the longest precomputed vector a write takes (pgvector's limit); its dimension must be the store's
MAX_VECTOR_DIM = 16_000
#: the least confidence (1 - charset-normalizer's "chaos" ratio) a detected encoding must reach
MIN_ENCODING_CONFIDENCE = 0.9

# dense index
EXACT_THRESHOLD = 50_000  # chunks per namespace; above it an HNSW index answers unfiltered queries
EMBED_BATCH = 16

# BM25 (one definition for every backend: the in-process postings and PostgreSQL's SQL score alike)
BM25_K1 = 1.2
BM25_B = 0.75
BM25_IDF_FLOOR = 1e-6  # a term in more than half the chunks keeps a tiny positive weight
#: PostgreSQL: where the BM25 leg runs ("process": in-process postings kept in step through the change
#: log, the library's and servers' default; "sql": aggregated per query, one-shot CLI commands'
#: default) and where a process saves its postings for the next one
PG_BM25_LEG_ENV = "HYBRIDMEM_PG_BM25_LEG"
PG_BM25_SNAPSHOT_DIR_ENV = "HYBRIDMEM_PG_BM25_SNAPSHOT_DIR"
#: the fusion of hybrid queries that name none (`Memory(fusion=)` overrides; default rrf)
FUSION_ENV = "HYBRIDMEM_FUSION"
#: the dtype the embedded backend's HNSW graph holds its vectors in: f32, f16 (half), i8 (a quarter);
#: candidates of a compressed graph are rescored exactly (`Memory(hnsw_dtype=)` overrides; default f32)
HNSW_DTYPE_ENV = "HYBRIDMEM_HNSW_DTYPE"
HNSW_DTYPES = ("f32", "f16", "i8")
#: a long HNSW build checkpoints its partial graph next to the store this often (seconds), so that a
#: process stopped mid-build resumes from there instead of starting over (10M vectors: ~2 h of build)
HNSW_CHECKPOINT_S = 600.0
HNSW_CHECKPOINT_ENV = "HYBRIDMEM_HNSW_CHECKPOINT_S"

# per-leg timeout (seconds): a slower leg is reported as timed out and the other leg still answers
LEG_TIMEOUT = 30.0


@dataclass
class Settings:
    db: Path = DEFAULT_DB
    namespace: str = DEFAULT_NAMESPACE
    embedder: str = DEFAULT_EMBEDDER
    chunk_size: int = DEFAULT_CHUNK_SIZE
    chunk_overlap: int = DEFAULT_CHUNK_OVERLAP
    exact_threshold: int = EXACT_THRESHOLD
    leg_timeout: float = LEG_TIMEOUT
    extra: dict[str, str] = field(default_factory=dict)


def settings_from_env(env: dict[str, str] | None = None) -> Settings:
    env = dict(os.environ if env is None else env)
    s = Settings()
    if env.get("HYBRIDMEM_DB"):
        s.db = Path(env["HYBRIDMEM_DB"])
    if env.get("HYBRIDMEM_NAMESPACE"):
        s.namespace = env["HYBRIDMEM_NAMESPACE"]
    if env.get("HYBRIDMEM_EMBEDDER"):
        s.embedder = env["HYBRIDMEM_EMBEDDER"]
    return s
