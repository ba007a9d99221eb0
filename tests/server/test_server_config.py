"""Server settings (file, environment, flags), the loopback-only rule without keys, and
``hybridmem serve`` run as a user runs it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from hybridmem.server.auth import AuthError, ForbiddenError, KeyRing, check_bind, is_loopback
from hybridmem.server.config import ConfigError, load_config, parse_api_keys


def test_parse_api_keys() -> None:
    assert parse_api_keys("key1-abcdef:ns1,ns2; key2-abcdef:*") == {
        "key1-abcdef": ("ns1", "ns2"),
        "key2-abcdef": ("*",),
    }
    for bad in ("justakey", "key:", ":ns"):
        with pytest.raises(ConfigError, match="key:namespace"):
            parse_api_keys(bad)


def test_config_file_env_and_flags(tmp_path: Path) -> None:
    toml = tmp_path / "server.toml"
    toml.write_text('port = 9000\nmax_top_k = 40\n[api_keys]\n"sk-team-a-123" = ["team-a"]\n"sk-admin-123" = "*"\n')
    cfg = load_config(toml, env={})
    assert (cfg.port, cfg.max_top_k) == (9000, 40)
    assert cfg.api_keys == {"sk-team-a-123": ("team-a",), "sk-admin-123": ("*",)}
    # the environment adds keys and overrides settings; flags override both
    env = {"HYBRIDMEM_API_KEYS": "sk-team-b-123:team-b", "HYBRIDMEM_SERVER_MAX_TOP_K": "25"}
    cfg = load_config(toml, env=env, port=9100, host=None)
    assert cfg.port == 9100 and cfg.max_top_k == 25 and cfg.host == "127.0.0.1"
    assert set(cfg.api_keys) == {"sk-team-a-123", "sk-admin-123", "sk-team-b-123"}
    js = tmp_path / "server.json"
    js.write_text(json.dumps({"server": {"request_timeout": 2.5}, "api_keys": {"sk-json-1234": ["x"]}}))
    cfg = load_config(js, env={})
    assert cfg.request_timeout == 2.5 and cfg.api_keys == {"sk-json-1234": ("x",)}


def test_read_replica_settings(tmp_path: Path) -> None:
    toml = tmp_path / "server.toml"
    toml.write_text('read_db = "postgresql://app@replica/mem"\nread_your_writes = true\n')
    cfg = load_config(toml, env={})
    assert (cfg.read_db, cfg.read_your_writes) == ("postgresql://app@replica/mem", True)
    assert (load_config(None, env={}).read_db, load_config(None, env={}).read_your_writes) == (None, False)


@pytest.mark.parametrize(
    "content,message",
    [
        ("max_topk = 3\n", "unknown setting max_topk"),
        ("port = 'many'\n", "port must be a number"),
        ("max_batch = 0\n", "max_batch must be a positive integer"),
        ("[api_keys]\nshort = ['a']\n", "at least 8 characters"),
        ('[api_keys]\n"sk-long-enough" = []\n', "maps to no namespace"),
        ("port = [\n", "not valid TOML"),
    ],
)
def test_bad_config_is_a_clear_error(tmp_path: Path, content: str, message: str) -> None:
    f = tmp_path / "bad.toml"
    f.write_text(content)
    with pytest.raises(ConfigError, match=message):
        load_config(f, env={})


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "nope.toml", env={})


def test_keyring() -> None:
    ring = KeyRing({"sk-team-a-123": ("team-a", "shared"), "sk-admin-123": ("*",)})
    p = ring.authenticate("sk-team-a-123")
    assert p.namespace(None) == "team-a" and p.namespace("shared") == "shared"
    with pytest.raises(ForbiddenError):
        p.namespace("team-b")
    assert p.visible(["default", "shared", "team-a", "team-b"]) == ["shared", "team-a"]
    admin = ring.authenticate("sk-admin-123")
    assert admin.namespace(None) == "default" and admin.namespace("anything") == "anything"
    for key in (None, "", "sk-team-a-12", "sk-team-a-1234"):
        with pytest.raises(AuthError):
            ring.authenticate(key)
    assert KeyRing({}).authenticate(None).namespace("any") == "any"  # no keys: open (loopback only)


def test_loopback_only_without_keys() -> None:
    for host in ("127.0.0.1", "127.0.0.2", "localhost", "::1", "[::1]"):
        assert is_loopback(host)
        check_bind(host, {})
    for host in ("0.0.0.0", "::", "192.168.1.10", "example.com"):
        assert not is_loopback(host)
        with pytest.raises(ConfigError, match="refusing to bind"):
            check_bind(host, {})
        check_bind(host, {"sk-some-key-1": ("ns",)})  # with keys: allowed


def _cli(*args: str, env: dict[str, str] | None = None, **kw) -> subprocess.Popen | subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "hybridmem.cli", *args]
    e = {k: v for k, v in os.environ.items() if not k.startswith("HYBRIDMEM_")}
    e.update(env or {})
    if kw.pop("background", False):
        return subprocess.Popen(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=60)


def test_serve_refuses_public_address_without_keys(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    r = _cli("--db", str(db), "--embedder", "hash", "serve", "--host", "0.0.0.0")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "refusing to bind to '0.0.0.0' without API keys" in r.stderr and "Traceback" not in r.stderr
    assert not db.exists()  # refused before touching anything


def test_serve_with_bad_config_is_one_line(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("prot = 1\n")
    r = _cli("--db", str(tmp_path / "m.db"), "--embedder", "hash", "serve", "--config", str(cfg))
    assert r.returncode == 2 and "unknown setting prot" in r.stderr and "Traceback" not in r.stderr


def test_serve_end_to_end(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    key = "sk-e2e-test-key"
    proc = _cli(
        "--embedder",
        "hash",
        "serve",
        "--db",
        str(tmp_path / "m.db"),
        "--port",
        str(port),
        env={"HYBRIDMEM_API_KEYS": f"{key}:agents"},
        background=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.2)
        h = {"Authorization": f"Bearer {key}"}
        r = httpx.post(
            url + "/v1/memories",
            headers=h,
            json={"memories": [{"id": "fact-pool", "text": "The billing DB pool is 200 connections."}]},
        )
        assert r.status_code == 200 and r.json() == {**r.json(), "added": ["fact-pool"], "namespace": "agents"}
        r = httpx.post(url + "/v1/query", headers=h, json={"search_text": "billing pool size", "mode": "bm25"})
        assert r.json()["results"][0]["chunk_id"] == "fact-pool_p1"
        assert httpx.post(url + "/v1/query", json={"search_text": "x"}).status_code == 401
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=20)
    assert "Traceback" not in err
    assert (tmp_path / "m.db").exists()
    from hybridmem.retrieve.blas import numpy_openblas

    if numpy_openblas() is not None and not (
        os.environ.get("OPENBLAS_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS")
    ):
        assert "numpy BLAS: 1 thread per call" in err  # many request threads: no per-call BLAS threads


def test_serve_with_the_e5_model_still_limits_blas(tmp_path: Path) -> None:
    """The bundled e5 model writes OMP_NUM_THREADS into the environment when it loads; the server's
    BLAS limit is decided before that, from what the user set."""
    from hybridmem.retrieve.blas import numpy_openblas

    if numpy_openblas() is None or os.environ.get("OPENBLAS_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS"):
        pytest.skip("numpy's bundled OpenBLAS not found here, or the user set a thread count")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = _cli("--embedder", "e5", "serve", "--db", str(tmp_path / "m.db"), "--port", str(port), background=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.2)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    assert "numpy BLAS: 1 thread per call" in err and "Traceback" not in err
