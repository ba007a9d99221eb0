"""`hybridmem ui`: a loopback server on the store, the explorer's URL printed, the page served."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from hybridmem import Memory


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_ui_command_serves_the_explorer_on_loopback(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with Memory(db, embedder="hash") as m:
        m.add("HEL-4040: the gateway answers HTTP 504", id="r1")
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    cmd = [sys.executable, "-m", "hybridmem.cli", "--db", str(db), "--embedder", "hash", "ui", "--port", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                page = httpx.get(url + "/ui/search?q=HEL-4040", timeout=2)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, "hybridmem ui did not start"
                time.sleep(0.2)
        assert page.status_code == 200 and "/ui/assets/app.js" in page.text
        hits = httpx.post(url + "/v1/query", json={"search_text": "HEL-4040", "mode": "bm25"}).json()
        assert [r["doc_id"] for r in hits["results"]] == ["r1"]
    finally:
        proc.terminate()
        output, _ = proc.communicate(timeout=30)
    assert f"memory explorer: http://127.0.0.1:{port}/ui" in output
