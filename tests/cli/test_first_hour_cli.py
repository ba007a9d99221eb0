"""A new user's first hour (issue 15), end to end through the CLI with the default e5 model: a
corpus with colliding names, a Latin-1 file, an oversize file, a re-ingest without --meta, a
version query, a filter on a key nobody wrote, and searches while the vectors are still pending."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hybridmem import config


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HYBRIDMEM_EMBEDDER", "HYBRIDMEM_DB")}
    cmd = [sys.executable, "-m", "hybridmem.cli", "--db", "mem.db", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600, env=env)


def _json(r: subprocess.CompletedProcess[str]) -> dict:
    assert r.returncode == 0, r.stderr
    return dict(json.loads(r.stdout))


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("newcomer")
    c = home / "corpus"
    for d in ("notes", "changelog", "git", "man", "big"):
        (c / d).mkdir(parents=True)
    (c / "notes" / "a.md").write_text("# Walrus\n\nThe markdown note: restart the walrus daemon after upgrades.\n")
    (c / "notes" / "a.txt").write_text("The plain-text note: otters hold the backup keys.\n")
    (c / "changelog" / "latin1.txt").write_bytes(
        "Version 1.4: réglage du délai d'expiration corrigé par François Lévêque.\n".encode("latin-1")
    )
    (c / "git" / "RelNotes-2.38.5.txt").write_text(
        "Git v2.38.5 Release Notes\n\nThis release merges up the fixes that appear in v2.30.9.\n"
    )
    (c / "git" / "colors.txt").write_text("Set color.diff to \x1b[38;5;0m for black, 38;5;1 for red, release 5.\n")
    (c / "man" / "ls.txt").write_text(
        "LS(1)\n\nNAME\n    ls - list directory contents\n\nDESCRIPTION\n    List files.\n"
    )
    with open(c / "big" / "huge.txt", "wb") as f:
        f.truncate(config.MAX_DOCUMENT_BYTES + 1)
    return home


def test_first_ingest_loses_nothing_silently(home: Path) -> None:
    r = _cli(home, "ingest", "corpus", "--meta", "team=docs")
    assert r.returncode == 7, r.stderr  # one input was not stored: the partial exit code
    assert "6 added" in r.stdout and "1 skipped" in r.stdout
    assert r.stderr.count("corpus/big/huge.txt") == 1 and "document limit" in r.stderr
    assert "corpus/changelog/latin1.txt" in r.stderr and "cp1252" in r.stderr  # the encoding is said
    md, txt = _json(_cli(home, "get", "corpus/notes/a.md")), _json(_cli(home, "get", "corpus/notes/a.txt"))
    assert "walrus" in md["chunks"][0]["text"] and "otters" in txt["chunks"][0]["text"]  # both kept
    assert "Lévêque" in _json(_cli(home, "get", "corpus/changelog/latin1"))["chunks"][0]["text"]


def test_reingest_another_way_keeps_ids_and_metadata(home: Path) -> None:
    r = _cli(home, "ingest", "./corpus/man/")  # typed otherwise, without --meta
    assert r.returncode == 0, r.stderr
    assert "0 added" in r.stdout and "1 unchanged" in r.stdout
    assert _json(_cli(home, "get", "corpus/man/ls"))["metadata"] == {"team": "docs"}
    r = _cli(home, "ingest", str(home / "corpus" / "man" / "ls.txt"), "--meta", "section=1")
    assert r.returncode == 0 and "1 updated" in r.stdout
    assert _json(_cli(home, "get", "corpus/man/ls"))["metadata"] == {"team": "docs", "section": 1}


def test_version_and_unwritten_key_queries(home: Path) -> None:
    hit = _json(_cli(home, "search", "2.38.5", "--mode", "bm25", "--json"))["results"][0]
    assert hit["doc_id"] == "corpus/git/RelNotes-2.38.5"
    resp = _json(_cli(home, "search", "walrus", "--mode", "bm25", "--filter", "environment=production", "--json"))
    assert resp["results"] == [] and "'environment'" in resp["warnings"][0] and "team" in resp["warnings"][0]


def test_hybrid_while_vectors_are_pending(home: Path) -> None:
    for q in ("list directory contents", "who holds the backup keys?"):
        bm25 = _json(_cli(home, "search", q, "--mode", "bm25", "--json"))
        hybrid = _json(_cli(home, "search", q, "--json"))  # the e5 model embeds the query; no chunk has a vector
        assert hybrid["pending_vectors"] > 0 and any("wait for their vectors" in w for w in hybrid["warnings"])
        assert hybrid["results"][0]["doc_id"] == bm25["results"][0]["doc_id"]
