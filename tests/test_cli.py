"""The CLI as a user runs it: a real subprocess, real SQLite file; clear errors, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CONTRACT = Path(__file__).resolve().parents[1].parent / "shared" / "contract"


def run(db: Path, *args: str, stdin: str | None = None, embedder: str | None = "hash") -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "hybridmem.cli", "--db", str(db)]
    if embedder:
        cmd += ["--embedder", embedder]
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(cmd + list(args), input=stdin, capture_output=True, text=True, timeout=120, env=env)


@pytest.fixture()
def store(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "pool.md").write_text(
        "# Pool\n\nPostgreSQL connection pool exhaustion causes HTTP 504 timeouts. Increase max_connections to 200.\n"
    )
    (docs / "cache.md").write_text("# Cache\n\nPurge the connector cache with `helio connector purge <name>`.\n")
    (docs / "blob.bin.md").write_bytes(b"\x00\x01\x02binary")
    db = tmp_path / "m.db"
    r = run(db, "ingest", str(docs), "--meta", "environment=production", "--meta", "severity=2", "--wait")
    assert r.returncode == 7, r.stderr  # some input was not stored: the documented partial exit code
    assert "2 added" in r.stdout
    assert "blob.bin.md" in r.stderr and "binary" in r.stderr  # skipped with a warning naming the file
    assert r.stderr.count("blob.bin.md") == 1  # said once, not once per layer
    return db


def test_search_table_and_json_contract(store: Path) -> None:
    r = run(store, "search", "HTTP 504 max_connections")
    assert r.returncode == 0, r.stderr
    assert "docs/pool_p1" in r.stdout
    r = run(store, "search", "HTTP 504 max_connections", "--json", "--top-k", "1")
    data = json.loads(r.stdout)
    assert data["total_retrieved"] == len(data["results"]) == 1
    hit = data["results"][0]
    assert hit["chunk_id"] == "docs/pool_p1"
    assert {"chunk_id", "rrf_score", "text", "source"} <= set(hit)
    assert hit["ranks"]["bm25"] == 1
    assert round(hit["rrf_score"], 4) == hit["rrf_score"]


def test_request_file_of_the_contract(store: Path, tmp_path: Path) -> None:
    req = json.loads((CONTRACT / "query_request.example.json").read_text())
    req["metadata_filter"] = {"environment": "production"}
    f = tmp_path / "q.json"
    f.write_text(json.dumps(req))
    r = run(store, "search", "--request", str(f), "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["query_id"] == req["query_id"]
    assert data["total_retrieved"] == len(data["results"]) >= 1


def test_stdin_ingest_get_delete_stats(store: Path) -> None:
    r = run(
        store, "ingest", "-", "--id", "fact-1", "--source", "agent", stdin="The billing DB pool is 200 connections."
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(run(store, "get", "fact-1").stdout)["source"] == "agent"
    r = run(store, "stats", "--json")
    assert json.loads(r.stdout)["documents"] == 3
    r = run(store, "delete", "fact-1", "nope")
    assert r.returncode == 3 and "deleted 1" in r.stdout and "nope" in r.stderr
    assert json.loads(run(store, "stats", "--json").stdout)["documents"] == 2


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["search", "   "], "search_text"),
        (["search", "pool", "--top-k", "0"], "top_k"),
        (["search", "pool", "--top-k", "1001"], "top_k"),
        (["search", "pool", "--dense-weight", "-1"], "dense_weight"),
        (["search", "pool", "--mode", "fuzzy"], "mode"),
        (["search", "pool", "--filter-json", '{"severity": {"$regex": "x"}}'], "$regex"),
        (["search", "pool", "--filter-json", "{bad json"], "--filter-json"),
    ],
)
def test_bad_input_is_a_clear_error(store: Path, args: list[str], needle: str) -> None:
    r = run(store, *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert needle in r.stderr
    assert "Traceback" not in r.stderr


def test_store_and_path_errors(store: Path, tmp_path: Path) -> None:
    r = run(store, "search", "pool", embedder="hash:64")
    assert r.returncode == 5 and "reembed" in r.stderr and "Traceback" not in r.stderr
    r = run(tmp_path / "x.db", "ingest", str(tmp_path / "missing"))
    assert r.returncode == 3 and "missing" in r.stderr
    bad = tmp_path / "garbage.db"
    bad.write_bytes(b"this is not sqlite" * 100)
    r = run(bad, "stats")
    assert r.returncode == 4 and "not a hybridmem store" in r.stderr and "Traceback" not in r.stderr
    r = run(tmp_path / "absent.db", "search", "pool")
    assert r.returncode == 3 and "no memory store" in r.stderr


@pytest.mark.integration
def test_demo_with_real_weights(tmp_path: Path) -> None:
    """`hybridmem demo` on the bundled e5 model: hybrid ranks both gold documents first and the
    production filter never shows a staging chunk (the command exits non-zero otherwise)."""
    r = subprocess.run(
        [sys.executable, "-m", "hybridmem.cli", "demo", "--demo-db", str(tmp_path / "demo.db")],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "hybrid ranks both gold documents first" in r.stdout
    assert "environments seen: production\n" in r.stdout
