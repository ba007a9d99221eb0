"""OpenAIEmbedder against a real local HTTP server speaking the OpenAI /v1/embeddings wire format."""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from hybridmem.embed import create_embedder
from hybridmem.embed.openai import OpenAIEmbedder
from hybridmem.errors import EmbedderError

DIM = 8


def fake_vector(text: str, dim: int = DIM) -> list[float]:
    """Deterministic, deliberately unnormalised vector per text, so order and normalisation are checkable."""
    rng = np.random.default_rng(sum(text.encode()) + len(text) * 7919)
    return (rng.normal(size=dim) * 5.0).tolist()


def expected(text: str, dim: int = DIM) -> np.ndarray:
    v = np.asarray(fake_vector(text, dim), dtype=np.float32)
    return v / np.linalg.norm(v)


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict → JSON; bytes → sent raw; None → a correct embeddings response
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to stall before answering (to provoke a client timeout)


@dataclass
class FakeServer:
    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    # Consumed one per request; when empty, every request gets a correct response.
    script: list[Reply] = field(default_factory=list)
    # Hook to tamper with a correct response: (request_body, response_dict) -> response_dict.
    mutate: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]] | None = None
    dim: int = DIM

    @property
    def inputs(self) -> list[list[str]]:
        return [r["body"]["input"] for r in self.requests]


def _make_handler(state: FakeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep pytest output clean
            pass

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = json.loads(raw)
            state.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
            reply = state.script.pop(0) if state.script else Reply()
            if reply.delay:
                time.sleep(reply.delay)
            if reply.body is None:
                data = [
                    {"object": "embedding", "index": i, "embedding": fake_vector(t, state.dim)}
                    for i, t in enumerate(body["input"])
                ]
                random.Random(len(state.requests)).shuffle(data)  # real servers may reorder; index rules
                payload: Any = {"object": "list", "data": data, "model": body["model"], "usage": {}}
                if state.mutate is not None:
                    payload = state.mutate(body, payload)
            else:
                payload = reply.body
            out = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            for k, v in reply.headers.items():
                self.send_header(k, v)
            self.end_headers()
            try:
                self.wfile.write(out)
            except OSError:  # the client gave up (timeout test); nothing to answer
                pass

    return Handler


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeServer]:
    # Environment must not leak into the tests: no proxy for 127.0.0.1, no real key or base URL.
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    for var in ("HYBRIDMEM_OPENAI_BASE_URL", "OPENAI_BASE_URL", "HYBRIDMEM_OPENAI_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    state = FakeServer(url=f"http://127.0.0.1:{httpd.server_address[1]}/v1")
    httpd.RequestHandlerClass = _make_handler(state)
    # a short poll interval keeps shutdown() (and so each test) fast
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def make(server: FakeServer, **kw: Any) -> OpenAIEmbedder:
    kw.setdefault("backoff", 0.001)
    kw.setdefault("timeout", 5.0)
    return OpenAIEmbedder("my-model", base_url=server.url, **kw)


# --- request format --------------------------------------------------------------------------


def test_request_body_and_auth_header(server: FakeServer) -> None:
    emb = make(server, api_key="sk-test-123", dim=DIM)
    emb.embed_documents(["alpha", "beta"])
    (req,) = server.requests
    assert req["path"] == "/v1/embeddings"
    assert req["body"] == {"model": "my-model", "input": ["alpha", "beta"], "encoding_format": "float"}
    headers = {k.lower(): v for k, v in req["headers"].items()}
    assert headers["authorization"] == "Bearer sk-test-123"
    assert headers["content-type"] == "application/json"


def test_no_authorization_header_without_key(server: FakeServer) -> None:
    emb = make(server, dim=DIM)
    emb.embed_query("hello")
    headers = {k.lower() for k in server.requests[0]["headers"]}
    assert "authorization" not in headers


def test_api_key_from_env_and_never_in_repr(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fallback")
    monkeypatch.setenv("HYBRIDMEM_OPENAI_API_KEY", "sk-preferred")
    emb = make(server, dim=DIM)
    emb.embed_query("x")
    headers = {k.lower(): v for k, v in server.requests[0]["headers"].items()}
    assert headers["authorization"] == "Bearer sk-preferred"
    assert "sk-" not in repr(emb)


def test_prefixes_are_applied(server: FakeServer) -> None:
    emb = make(server, dim=DIM, query_prefix="query: ", document_prefix="passage: ")
    emb.embed_query("q")
    emb.embed_documents(["d"])
    assert server.inputs == [["query: q"], ["passage: d"]]


# --- output ----------------------------------------------------------------------------------


def test_shape_normalisation_and_order(server: FakeServer) -> None:
    texts = [f"text number {i}" for i in range(7)]
    emb = make(server, dim=DIM)
    out = emb.embed_documents(texts)
    assert out.shape == (7, DIM) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-5)
    # the server shuffled `data`; rows must still line up with the inputs
    for row, t in zip(out, texts):
        np.testing.assert_allclose(row, expected(t), rtol=1e-5, atol=1e-6)
    q = emb.embed_query("text number 3")
    assert q.shape == (DIM,)
    np.testing.assert_allclose(q, out[3], rtol=1e-5, atol=1e-6)


def test_batching(server: FakeServer) -> None:
    emb = make(server, dim=DIM, batch_size=2)
    texts = ["a", "b", "c", "d", "e"]
    out = emb.embed_documents(texts)
    assert server.inputs == [["a", "b"], ["c", "d"], ["e"]]
    assert out.shape == (5, DIM)
    np.testing.assert_allclose(out[4], expected("e"), rtol=1e-5, atol=1e-6)


def test_lazy_dim_discovery(server: FakeServer) -> None:
    emb = make(server)
    assert server.requests == []  # constructing never touches the network
    assert "dim=?" in repr(emb) and server.requests == []  # nor does repr
    assert emb.dim == DIM
    assert server.inputs == [["dimension probe"]]
    assert emb.dim == DIM
    assert len(server.requests) == 1  # cached


def test_dim_learnt_from_first_batch_without_probe(server: FakeServer) -> None:
    emb = make(server)
    emb.embed_documents(["one", "two"])
    assert emb.dim == DIM
    assert server.inputs == [["one", "two"]]


# --- retries ---------------------------------------------------------------------------------


def test_retry_on_429_with_retry_after(server: FakeServer) -> None:
    server.script = [Reply(429, {"error": {"message": "slow down"}}, {"Retry-After": "0"})]
    emb = make(server, dim=DIM, backoff=10.0)  # a 10 s backoff would hang: Retry-After must win
    out = emb.embed_query("hi")
    assert len(server.requests) == 2
    np.testing.assert_allclose(out, expected("hi"), rtol=1e-5, atol=1e-6)


def test_retry_on_500_then_success(server: FakeServer) -> None:
    server.script = [Reply(500, {"error": {"message": "boom"}}), Reply(503, b"upstream down")]
    emb = make(server, dim=DIM)
    out = emb.embed_documents(["x"])
    assert len(server.requests) == 3
    assert out.shape == (1, DIM)


def test_gives_up_after_max_retries(server: FakeServer) -> None:
    server.script = [Reply(500, {"error": {"message": "still broken"}}) for _ in range(10)]
    emb = make(server, dim=DIM, max_retries=2)
    with pytest.raises(EmbedderError, match=r"3 attempt.*HTTP 500.*still broken"):
        emb.embed_query("x")
    assert len(server.requests) == 3


def test_retry_on_connection_error(server: FakeServer) -> None:
    # Nothing listens on this port once the socket is closed: connection refused, every time.
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    emb = OpenAIEmbedder("m", base_url=f"http://127.0.0.1:{port}/v1", dim=DIM, max_retries=1, backoff=0.001)
    with pytest.raises(EmbedderError, match="2 attempt.*connection error"):
        emb.embed_query("x")


def test_retry_on_timeout(server: FakeServer) -> None:
    server.script = [Reply(200, delay=0.3)]
    emb = make(server, dim=DIM, timeout=0.1)
    out = emb.embed_query("slow")
    assert len(server.requests) == 2
    np.testing.assert_allclose(out, expected("slow"), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("status", [400, 401])
def test_client_error_is_not_retried(server: FakeServer, status: int) -> None:
    msg = "Incorrect API key provided" if status == 401 else "input must not be empty"
    server.script = [Reply(status, {"error": {"message": msg, "type": "invalid_request_error"}})]
    emb = make(server, dim=DIM, api_key="sk-secret-999")
    with pytest.raises(EmbedderError, match=str(status)) as info:
        emb.embed_query("x")
    assert msg in str(info.value)
    assert "sk-secret-999" not in str(info.value)
    assert len(server.requests) == 1


def test_ollama_style_string_error(server: FakeServer) -> None:
    server.script = [Reply(404, {"error": 'model "nope" not found, try pulling it first'})]
    emb = make(server, dim=DIM)
    with pytest.raises(EmbedderError, match=r'404.*model "nope" not found'):
        emb.embed_query("x")


# --- malformed responses ---------------------------------------------------------------------


def test_invalid_json(server: FakeServer) -> None:
    server.script = [Reply(200, b"<html>definitely not json</html>")]
    with pytest.raises(EmbedderError, match="not valid JSON"):
        make(server, dim=DIM).embed_query("x")
    assert len(server.requests) == 1


def test_missing_data_field(server: FakeServer) -> None:
    server.script = [Reply(200, {"object": "list"})]
    with pytest.raises(EmbedderError, match="'data'"):
        make(server, dim=DIM).embed_query("x")


def test_missing_embedding_field(server: FakeServer) -> None:
    server.mutate = lambda req, resp: {"data": [{"index": 0}]}
    with pytest.raises(EmbedderError, match="'embedding'"):
        make(server, dim=DIM).embed_query("x")


def test_wrong_vector_count(server: FakeServer) -> None:
    server.mutate = lambda req, resp: {**resp, "data": resp["data"][:-1]}
    with pytest.raises(EmbedderError, match="2 embeddings for 3 inputs"):
        make(server, dim=DIM).embed_documents(["a", "b", "c"])


def test_duplicate_index(server: FakeServer) -> None:
    server.mutate = lambda req, resp: {**resp, "data": [{**d, "index": 0} for d in resp["data"]]}
    with pytest.raises(EmbedderError, match="index"):
        make(server, dim=DIM).embed_documents(["a", "b"])


def test_wrong_dimension_in_later_batch(server: FakeServer) -> None:
    def shrink_second_batch(req: dict[str, Any], resp: dict[str, Any]) -> dict[str, Any]:
        if len(server.requests) == 2:
            for d in resp["data"]:
                d["embedding"] = d["embedding"][:-1]
        return resp

    server.mutate = shrink_second_batch
    emb = make(server, batch_size=2)  # dim unknown: the first batch fixes it, the second breaks it
    with pytest.raises(EmbedderError, match=rf"shape \(2, {DIM - 1}\).*expected \(2, {DIM}\)"):
        emb.embed_documents(["a", "b", "c", "d"])


def test_given_dim_mismatch(server: FakeServer) -> None:
    with pytest.raises(EmbedderError, match="expected"):
        make(server, dim=DIM + 1).embed_query("x")


# --- spec strings ----------------------------------------------------------------------------


def test_create_embedder_uses_env_base_url(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/wrong")  # lower priority
    monkeypatch.setenv("HYBRIDMEM_OPENAI_BASE_URL", server.url + "/")
    emb = create_embedder("openai:my-model")
    assert isinstance(emb, OpenAIEmbedder)
    assert emb.name == "openai:my-model"
    assert emb.dim == DIM
    out = emb.embed_documents(["z"])
    np.testing.assert_allclose(out[0], expected("z"), rtol=1e-5, atol=1e-6)
    assert server.requests[-1]["body"]["model"] == "my-model"


def test_default_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HYBRIDMEM_OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert OpenAIEmbedder("m").endpoint == "https://api.openai.com/v1/embeddings"


def test_st_missing_dependency_gives_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # makes the import fail
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the backend sets it if unset; keep the process clean
    with pytest.raises(EmbedderError, match=r"pip install 'hybridmem\[st\]'"):
        create_embedder("st:whatever")


def test_st_backend_against_fake_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real package is too heavy for unit tests; a stand-in checks how its documented API is called."""
    calls: list[dict[str, Any]] = []

    class FakeST:
        def __init__(self, name: str, **kw: Any) -> None:
            calls.append({"init": name, **kw})

        def get_sentence_embedding_dimension(self) -> int:
            return 3

        def encode(self, texts: list[str], **kw: Any) -> np.ndarray:
            calls.append({"encode": list(texts), **kw})
            return np.tile(np.array([[3.0, 0.0, 4.0]], dtype=np.float32), (len(texts), 1))

    fake_module = types.SimpleNamespace(SentenceTransformer=FakeST)
    monkeypatch.setitem(sys.modules, "sentence_transformers", fake_module)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    from hybridmem.embed.sentence_transformers import SentenceTransformerEmbedder

    emb = SentenceTransformerEmbedder("/models/mini", query_prefix="q: ", document_prefix="d: ", batch_size=4)
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert calls[0] == {"init": "/models/mini", "device": "cpu", "local_files_only": True}
    assert (emb.name, emb.dim) == ("st:/models/mini", 3)
    docs = emb.embed_documents(["a", "b"])
    q = emb.embed_query("c")
    assert docs.shape == (2, 3) and q.shape == (3,)
    np.testing.assert_allclose(q, [0.6, 0.0, 0.8], rtol=1e-6)
    assert calls[1]["encode"] == ["d: a", "d: b"] and calls[2]["encode"] == ["q: c"]
    assert calls[1]["normalize_embeddings"] is True and calls[1]["convert_to_numpy"] is True
