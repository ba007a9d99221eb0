"""Regressions for what the hardening benchmarks found in the server (``bench/fuzz.py``,
``bench/worst_case.py``, ``bench/pg_restarts.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hybridmem import Memory
from hybridmem.server.config import ServerConfig
from server_utils import LiveServer, assert_error

KEY = "key-hardening-0001"


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    mem = Memory(Path(tmp_path_factory.mktemp("found")) / "m.db", embedder="hash", auto_embed=False)
    with LiveServer(mem, ServerConfig(api_keys={KEY: ("default",)})) as s:
        yield s
    mem.close()


@pytest.mark.parametrize(
    "content_type,body",
    [
        ("multipart/form-data", b"--XX\r\n"),  # no boundary parameter
        ("multipart/form-data; boundary=", b"garbage"),  # an empty one
    ],
)
def test_unparsable_multipart_is_422_not_400(srv: LiveServer, content_type: str, body: bytes) -> None:
    """bench/fuzz.py: a multipart upload Starlette cannot parse was a 400 ``bad_request``, a status
    the error contract (docs/server.md) does not have; a malformed body is a 422."""
    with srv.client(KEY) as c:
        r = c.post("/v1/documents", content=body, headers={"content-type": content_type})
    err = assert_error(r, 422, "validation_error")
    assert err["message"].startswith("request body could not be parsed")
