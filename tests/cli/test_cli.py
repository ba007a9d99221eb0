"""The CLI as a user runs it: a real subprocess, real SQLite file; clear errors, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import shared_path


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
    req = json.loads(shared_path("contract", "query_request.example.json").read_text())
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


def test_files_of_one_name_in_several_directories_stay_apart(tmp_path: Path) -> None:
    # `hybridmem ingest site-packages/*.dist-info/METADATA` from elsewhere: each file's own parent
    # as the base made every id "METADATA", and each file silently overwrote the one before
    for pkg, word in (("alpha-1.0", "walrus"), ("beta-2.0", "narwhal"), ("gamma-3.0", "axolotl")):
        (tmp_path / "site" / pkg).mkdir(parents=True)
        (tmp_path / "site" / pkg / "README.md").write_text(f"# {pkg}\n\nThe {word} package.\n", encoding="utf-8")
    db = tmp_path / "m.db"
    files = sorted(str(p) for p in (tmp_path / "site").glob("*/README.md"))
    r = run(db, "ingest", *files, "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert sorted(rep["added"]) == ["alpha-1.0/README", "beta-2.0/README", "gamma-3.0/README"]
    assert rep["updated"] == [] and rep["skipped"] == []
    for pkg, word in (("alpha-1.0", "walrus"), ("beta-2.0", "narwhal"), ("gamma-3.0", "axolotl")):
        hit = json.loads(run(db, "search", word, "--mode", "bm25", "--json").stdout)["results"][0]
        assert hit["chunk_id"] == f"{pkg}/README_p1" and hit["source"] == f"{pkg}/README.md"
    # the same files again, in another order: the same ids, nothing rewritten
    r = run(db, "ingest", *reversed(files), "--json")
    assert r.returncode == 0 and sorted(json.loads(r.stdout)["unchanged"]) == sorted(rep["added"])
    # one file alone keeps the id it always had (its directory is the base)
    r = run(tmp_path / "one.db", "ingest", files[0], "--json")
    assert json.loads(r.stdout)["added"] == ["README"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["search", "   "], "search_text"),
        (["search", "pool", "--top-k", "0"], "top_k"),
        (["search", "pool", "--top-k", "1001"], "top_k"),
        (["search", "pool", "--dense-weight", "-1"], "dense_weight"),
        (["search", "pool", "--mode", "fuzzy"], "mode"),
        (["search", "pool", "--fusion", "borda"], "hybrid_params.fusion"),
        (["search", "pool", "--filter-json", '{"severity": {"$regex": "x"}}'], "$regex"),
        (["search", "pool", "--filter-json", "{bad json"], "--filter-json"),
    ],
)
def test_bad_input_is_a_clear_error(store: Path, args: list[str], needle: str) -> None:
    r = run(store, *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert needle in r.stderr
    assert "Traceback" not in r.stderr


def test_search_fusion_option(store: Path) -> None:
    r = run(store, "search", "connection pool", "--fusion", "adaptive", "--json")
    assert r.returncode == 0, r.stderr
    body = json.loads(r.stdout)
    assert body["fusion"] == "adaptive" and sum(body["leg_weights"][n] for n in ("bm25", "dense")) == pytest.approx(2)
    text = run(store, "search", "connection pool", "--fusion", "dbsf").stdout
    assert "fusion dbsf: bm25 1.00 · dense 1.00" in text


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


# ------------------------------------------------------------------ output for pipes and logs (issue 15)


def run_piped(
    db: Path, *args: str, tty: bool = False, env_python: list[str] | None = None, **env: str
) -> subprocess.CompletedProcess:
    """As :func:`run`, stdout and stderr pipes, with no COLUMNS (a pipe's width is rich's 80) and
    rich's terminal detection pinned (``tty``: as if both were a terminal); ``env_python``: options
    of the interpreter (``-X importtime``)."""
    base = {
        k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR") and not k.startswith("HYBRIDMEM_")
    }
    cmd = [sys.executable, *(env_python or []), "-m", "hybridmem.cli", "--db", str(db), "--embedder", "hash", *args]
    e = {**base, "TTY_COMPATIBLE": "1" if tty else "0", **env}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=e)


def test_piped_results_are_plain_lines_that_fit_80_columns(store: Path) -> None:
    import re

    r = run_piped(store, "search", "PostgreSQL connection pool HTTP 504 max_connections", "--local")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines[:-1]), lines  # the results (the footer is one log line)
    assert not set("┃│┏━") & set(r.stdout)  # no table
    first, snippet = lines[0], lines[1]
    assert first.split()[:3] == ["1", first.split()[1], "docs/pool_p1"] and "bm25=1" in first
    assert snippet.startswith("    # Pool PostgreSQL connection pool exhaustion") and snippet.endswith("…")
    assert re.match(r"\d+ results?, mode hybrid", lines[-1])
    r = run_piped(store, "search", "PostgreSQL connection pool", "--local", tty=True)
    assert "┃" in r.stdout and "docs/pool_p1" in r.stdout  # a terminal still gets the table


def test_one_result_is_singular(store: Path) -> None:
    r = run_piped(store, "search", "max_connections", "--top-k", "1", "--mode", "bm25")
    assert r.returncode == 0, r.stderr
    assert "1 result, mode bm25" in r.stdout and "1 results" not in r.stdout
    r = run_piped(store, "embed")
    assert "embedded 0 chunks" in r.stdout


def test_errors_are_one_line_on_a_pipe(store: Path, tmp_path: Path) -> None:
    deep = tmp_path / ("a-rather-long-directory-name-" * 3) / "absent.db"
    r = run_piped(deep, "search", "pool")
    assert r.returncode == 3
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and len(lines[0]) > 80 and str(deep) in lines[0], r.stderr


def test_filter_errors_name_the_filter_option(store: Path) -> None:
    r = run_piped(store, "search", "pool", "--filter", "nokeyvalue")
    assert r.returncode == 2 and "--filter: expected key=value, got 'nokeyvalue'" in r.stderr
    assert "--meta" not in r.stderr
    r = run_piped(store, "ask", "pool?", "--filter", "nokeyvalue")
    assert r.returncode == 2 and "--filter:" in r.stderr and "--meta" not in r.stderr


def test_search_text_and_request_file_together_is_an_error(store: Path, tmp_path: Path) -> None:
    f = tmp_path / "q.json"
    f.write_text(json.dumps({"search_text": "pool"}))
    r = run_piped(store, "search", "tar", "--request", str(f))
    assert r.returncode == 2 and "not both" in r.stderr and "--request" in r.stderr and not r.stdout
    assert run_piped(store, "search", "--request", str(f), "--mode", "bm25").returncode == 0


def test_search_in_a_missing_namespace_says_so(store: Path) -> None:
    r = run_piped(store, "--namespace", "nope", "search", "pool", "--mode", "bm25")
    assert r.returncode == 0 and "0 results" in r.stdout
    assert "warning:" in r.stderr and "'nope'" in r.stderr and "default" in r.stderr


def test_demo_prints_progress_lines_when_piped(tmp_path: Path) -> None:
    """Not a terminal: no live bars, but a plain line per step (and every 10 s in a long one)."""
    import re

    r = subprocess.run(
        [sys.executable, "-m", "hybridmem.cli", "demo", "--embedder", "hash", "--demo-db", str(tmp_path / "d.db")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TTY_COMPATIBLE": "0"},
    )
    assert "Traceback" not in r.stderr
    for step in ("indexing", "embedding", "scoring the demo questions"):
        assert re.search(rf"^{step}: 0/\d+ \(0%\), 0 s elapsed$", r.stderr, re.M), r.stderr
        assert re.search(rf"^{step}: (\d+)/\1 done in \d+\.\d s$", r.stderr, re.M), r.stderr


# ------------------------------------------------------------------ search through a running `hybridmem serve`


def _serve(db: Path) -> tuple[subprocess.Popen, int]:
    import socket
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("HYBRIDMEM_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "hybridmem.cli", "--db", str(db), "--embedder", "hash", "serve", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    announced = db.with_name(db.name + ".serve.json")
    deadline = time.monotonic() + 60
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.1)
    assert json.loads(announced.read_text()) == {
        **json.loads(announced.read_text()),
        "pid": proc.pid,
        "host": "127.0.0.1",
        "port": port,
        "api_key_required": False,
    }
    return proc, port


def test_search_uses_a_running_server_for_the_query_vector(store: Path) -> None:
    import re

    import httpx

    proc, port = _serve(store)
    try:
        r = run_piped(store, "search", "HTTP 504 max_connections")
        assert r.returncode == 0, r.stderr
        assert "docs/pool_p1" in r.stdout and f"query embedded by server at 127.0.0.1:{port}" in r.stdout
        assert "model loaded" not in r.stdout
        # ... without even importing the memory here (let alone a model)
        r = run_piped(store, "search", "HTTP 504", env_python=["-X", "importtime"])
        assert "query embedded by server" in r.stdout and "import time" in r.stderr
        assert not re.search(r"\| +hybridmem\.(memory|embed|store)\b|\| +numpy$", r.stderr, re.M)
        r = run_piped(store, "search", "HTTP 504 max_connections", "--json", "--top-k", "1")
        assert json.loads(r.stdout)["results"][0]["chunk_id"] == "docs/pool_p1"  # the contract, unchanged
        assert f"query embedded by server at 127.0.0.1:{port}" in r.stderr
        # a bad request is the same error as without a server
        r = run_piped(store, "search", "pool", "--filter-json", '{"severity": {"$regex": "x"}}')
        assert r.returncode == 2 and "$regex" in r.stderr
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
        assert re.search(r'hybridmem_http_requests_total\{[^}]*endpoint="/v1/query"[^}]*status="200"\} 3', metrics)
        # --local, and modes that need no vector, search here
        r = run_piped(store, "search", "HTTP 504", "--local")
        assert re.search(r"query embedded here by hash:256, model loaded in \d+\.\d\d s", r.stdout), r.stdout
        r = run_piped(store, "search", "HTTP 504", "--mode", "bm25")
        assert "server" not in r.stdout and "model loaded" not in r.stdout
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "Traceback" not in err
    assert not store.with_name(store.name + ".serve.json").exists()  # withdrawn on shutdown
    r = run_piped(store, "search", "HTTP 504 max_connections")
    assert r.returncode == 0 and "model loaded in" in r.stdout and "server" not in r.stdout + r.stderr


def test_search_ignores_a_stale_or_silent_server(store: Path) -> None:
    announced = store.with_name(store.name + ".serve.json")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    info = {"pid": int(gone.stdout), "host": "127.0.0.1", "port": 9, "api_key_required": False, "max_top_k": 100}
    announced.write_text(json.dumps(info))
    r = run_piped(store, "search", "HTTP 504 max_connections")
    assert r.returncode == 0 and "docs/pool_p1" in r.stdout and "model loaded in" in r.stdout
    assert "server" not in r.stderr  # a dead pid: a stale file, silently ignored
    announced.write_text(json.dumps({**info, "pid": os.getpid()}))  # alive, but nothing listens on port 9
    r = run_piped(store, "search", "HTTP 504 max_connections")
    assert r.returncode == 0 and "docs/pool_p1" in r.stdout and "model loaded in" in r.stdout
    assert "not using the hybridmem server at 127.0.0.1:9: it did not answer" in r.stderr
    announced.write_text(json.dumps({**info, "pid": os.getpid(), "api_key_required": True}))
    r = run_piped(store, "search", "HTTP 504 max_connections")
    assert r.returncode == 0 and "HYBRIDMEM_API_KEY" in r.stderr


def test_search_with_another_embedder_than_the_server_searches_here(store: Path) -> None:
    announced = store.with_name(store.name + ".serve.json")
    info = {"pid": os.getpid(), "host": "127.0.0.1", "port": 9, "api_key_required": False, "max_top_k": 100}
    announced.write_text(json.dumps({**info, "embedder": "hash:256", "spec": "hash"}))
    r = run_piped(store, "--embedder", "hash:64", "search", "pool")
    assert "it embeds with hash:256, not hash:64" in r.stderr
    assert r.returncode == 5 and "reembed" in r.stderr  # the local answer: the store was built with hash:256


def test_the_shipped_example_request_is_the_contracts() -> None:
    shipped = Path(__file__).resolve().parents[2] / "examples" / "query_request.json"
    assert json.loads(shipped.read_text()) == json.loads(
        shared_path("contract", "query_request.example.json").read_text()
    )


def test_jsonl_records_with_precomputed_vectors(tmp_path: Path) -> None:
    """`hybridmem ingest FILE.jsonl` takes each record's `vector` (or `embedding`) as its
    precomputed vector and `occurred_at` as its time; a record of the wrong dimension is skipped
    naming the field, the others stored; the vector is the one searched."""
    from hybridmem import Memory  # noqa: PLC0415
    from hybridmem.embed.hashing import HashEmbedder  # noqa: PLC0415

    emb = HashEmbedder(64)
    q = emb.embed_query("zebra quantum harbour").tolist()
    records = [
        {"id": "menu", "text": "The cafeteria menu changes on Mondays.", "vector": q, "occurred_at": "2024-05-01"},
        {"id": "pool", "text": "Raise max_connections to 200.", "embedding": emb.embed_query("pool").tolist()},
        {"id": "short", "text": "A vector of the wrong size.", "vector": [0.5, 0.5]},
    ]
    src = tmp_path / "with-vectors.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    db = tmp_path / "v.db"
    r = run(db, "ingest", str(src), embedder="hash:64")
    assert r.returncode == 7, r.stderr  # one record skipped: the partial exit code
    assert "2 added" in r.stdout
    assert "short" in r.stderr and "vector" in r.stderr and "dimension 2" in r.stderr
    with Memory(db, embedder="hash:64", auto_embed=False) as m:
        assert m.store.pending_count(m.namespace) == 0  # nothing left for the model: both vectors given
        menu = m.get("menu")
        assert menu["occurred_at"].startswith("2024-05-01") and "vector" not in menu["metadata"]
        hits = m.search({"search_text": "zebra quantum harbour", "mode": "vector", "top_k": 1}).results
        assert [h.doc_id for h in hits] == ["menu"]  # the record's vector, not an embedding of its text
