"""Fuzzing the live server from its own OpenAPI spec (schemathesis, valid and invalid requests for
every operation) and with arbitrary JSON: never a 5xx, every error is the JSON error shape."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from hybridmem import Memory
from hybridmem.server.config import ServerConfig
from server_utils import LiveServer

KEY = "key-fuzzer-0001"
EXAMPLES = 12  # per operation and generation mode: bounded, the whole file runs in well under a minute
FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,  # the same generated requests every run: "valid requests got through" must not be luck
    phases=[Phase.generate],
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    mem = Memory(tmp_path_factory.mktemp("fuzz") / "m.db", embedder="hash", auto_embed=True)
    mem.add_documents(
        [
            {
                "id": f"d{i}",
                "text": f"HTTP 50{i} on billing pool HEL-40{i}",
                "metadata": {"environment": "production" if i % 2 else "staging", "severity": i},
            }
            for i in range(6)
        ]
    )
    with LiveServer(
        mem, ServerConfig(api_keys={KEY: ("default", "fuzz")}, max_top_k=50, max_batch=20, max_body_bytes=200_000)
    ) as s:
        yield s
    mem.close()


def _check(status: int, content_type: str, text: str, what: str) -> None:
    assert status < 500, f"{what} -> {status}: {text[:500]}"
    if status >= 400:
        assert content_type.startswith("application/json"), (what, status, content_type)
        err = json.loads(text)["error"]
        assert isinstance(err["type"], str) and err["message"] and "Traceback" not in err["message"]


def _operations(srv: LiveServer) -> list[Any]:
    schema = schemathesis.openapi.from_url(srv.url + "/openapi.json")
    ops = [op.ok() for op in schema.get_all_operations()]
    assert len(ops) >= 10  # query, answer, memories (post/get/put/delete), documents, stats, healthz, metrics
    return ops


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=["valid", "invalid"])
def test_openapi_fuzz_never_5xx(srv: LiveServer, mode: GenerationMode) -> None:
    seen: dict[str, set[int]] = {}
    for op in _operations(srv):

        @FUZZ_SETTINGS
        @given(case=op.as_strategy(generation_mode=mode))
        def run(case: Any) -> None:
            r = case.call(base_url=srv.url, headers={"X-API-Key": KEY}, timeout=30)
            ct = r.headers.get("content-type") or [""]  # schemathesis: header -> list of values
            _check(r.status_code, ct[0] if isinstance(ct, list) else ct, r.text, f"{case.method} {case.formatted_path}")
            seen.setdefault(f"{case.method} {op.path}", set()).add(r.status_code)

        try:
            run()
        except Unsatisfiable:  # no invalid request exists for an operation without inputs (GET /healthz)
            assert mode == GenerationMode.NEGATIVE and not op.body and not op.query and not op.path_parameters
    assert {"POST /v1/query", "POST /v1/memories", "PUT /v1/memories/{doc_id}", "POST /v1/documents"} <= set(seen)
    if mode == GenerationMode.POSITIVE:
        # valid requests did get through, not only errors
        assert any(s < 300 for s in seen.get("POST /v1/query", set())), seen
        assert any(s < 300 for s in seen.get("POST /v1/memories", set())), seen


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
QUERY_KEYS = [
    "search_text",
    "top_k",
    "mode",
    "metadata_filter",
    "hybrid_params",
    "fetch_k",
    "namespace",
    "rerank",
    "query_id",
    "reranker",
]
FILTER_KEYS = ["environment", "severity", "$and", "$or", "$in", "$gte", "nope"]


@FUZZ_SETTINGS
@given(
    body=st.dictionaries(st.sampled_from(QUERY_KEYS), json_values, max_size=6),
    flt=st.dictionaries(
        st.sampled_from(FILTER_KEYS),
        json_values
        | st.dictionaries(
            st.sampled_from(["$in", "$nin", "$gt", "$gte", "$lt", "$lte", "$ne", "$exists", "$eq"]),
            json_values,
            max_size=2,
        ),
        max_size=3,
    ),
    text=st.text(max_size=40),
)
def test_arbitrary_json_queries_never_5xx(srv: LiveServer, body: dict, flt: dict, text: str) -> None:
    with httpx.Client(base_url=srv.url, headers={"X-API-Key": KEY}, timeout=30) as c:
        for payload in (body, {"search_text": text or "x", "metadata_filter": flt}, {**body, "search_text": text}):
            r = c.post("/v1/query", json=payload)
            _check(r.status_code, r.headers.get("content-type", ""), r.text, f"/v1/query {payload!r}")
        r = c.post("/v1/memories", json={"memories": [{"text": text or "x", "metadata": flt}]})
        _check(r.status_code, r.headers.get("content-type", ""), r.text, f"/v1/memories {flt!r}")


@pytest.mark.parametrize(
    "path,raw",
    [
        ("/v1/query", b'{"search_text": "x", "metadata_filter": {"severity": {"$gte": Infinity}}}'),
        ("/v1/query", b'{"search_text": "x", "hybrid_params": {"dense_weight": NaN}}'),
        ("/v1/query", b'{"search_text": "x", "top_k": 1e400}'),
        ("/v1/memories", b'{"memories": [{"text": "x", "metadata": {"score": NaN}}]}'),
        ("/v1/memories", b'{"memories": [{"text": "x", "metadata": {"a": ' + b"[" * 3000 + b"]" * 3000 + b"}}]}"),
        # unpaired surrogates, legal as JSON escapes, cannot be stored: 422, never a 500
        ("/v1/query", b'{"search_text": "\\ud800 lone surrogate"}'),
        ("/v1/query", b'{"search_text": "x", "metadata_filter": {"environment": {"$in": ["\\ud800"]}}}'),
        ("/v1/memories", b'{"memories": [{"text": "x", "metadata": {"k": "\\udc00"}}]}'),
        ("/v1/memories", b'{"memories": [{"text": "x", "metadata": {"\\ud800": 1}}]}'),
    ],
)
def test_non_standard_json_is_a_client_error(srv: LiveServer, path: str, raw: bytes) -> None:
    with httpx.Client(base_url=srv.url, headers={"X-API-Key": KEY, "content-type": "application/json"}) as c:
        r = c.post(path, content=raw)
    _check(r.status_code, r.headers.get("content-type", ""), r.text, f"{path} {raw[:80]!r}")
    assert r.status_code in (200, 422), r.text
