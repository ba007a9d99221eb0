"""The HTTP error contract read from the error tree: each class of :mod:`hybridmem.errors` (and the
server's own) declares its status, ``type`` and headers; a subclass that declares none answers like
its parent."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from hybridmem import errors as E
from hybridmem.deadline import DeadlineExceeded
from hybridmem.llm._http import HTTPStatusError
from hybridmem.server.auth import AuthError, ForbiddenError
from hybridmem.server.common import NotImplementedOnServer
from hybridmem.server.config import ConfigError
from hybridmem.server.http import _install_error_handlers
from hybridmem.server.jobs import JobQueueFull
from hybridmem.server.limits import RequestTimeoutError, StoreBusyError
from server_utils import assert_error


class _SchemaError(E.StoreError):
    """A subclass that declares nothing: answers as a StoreError."""


#: class -> (status, type, extra headers): the answers clients rely on
CONTRACT: dict[type[E.HybridMemError], tuple[int, str, dict[str, str]]] = {
    E.HybridMemError: (500, "hybrid_mem_error", {}),
    E.ValidationError: (422, "validation_error", {}),
    E.FilterError: (422, "filter_error", {}),
    E.NotFoundError: (404, "not_found", {}),
    E.StoreError: (500, "store_error", {}),
    E.EmbedderError: (502, "embedder_error", {}),
    E.IngestError: (422, "ingest_error", {}),
    E.LLMError: (502, "llm_error", {}),
    HTTPStatusError: (502, "llm_error", {}),
    AuthError: (401, "unauthorized", {"www-authenticate": "Bearer"}),
    ForbiddenError: (403, "forbidden", {}),
    RequestTimeoutError: (504, "timeout", {}),
    StoreBusyError: (503, "busy", {"retry-after": "1"}),
    E.StoreUnavailableError: (503, "unavailable", {"retry-after": "1"}),
    E.StoreFullError: (507, "insufficient_storage", {"retry-after": "30"}),
    DeadlineExceeded: (504, "timeout", {}),
    ConfigError: (500, "config_error", {}),
    NotImplementedOnServer: (501, "not_implemented", {}),
    JobQueueFull: (429, "too_many_requests", {"retry-after": "5"}),
    _SchemaError: (500, "store_error", {}),
}


def _raising(exc: BaseException) -> TestClient:
    app = FastAPI()
    _install_error_handlers(app)

    @app.get("/boom")
    def boom() -> None:
        raise exc

    return TestClient(app, raise_server_exceptions=False)


def _instance(cls: type[E.HybridMemError]) -> E.HybridMemError:
    return cls("upstream said no", 400) if cls is HTTPStatusError else cls("upstream said no")


@pytest.mark.parametrize("cls", list(CONTRACT), ids=lambda c: c.__name__)
def test_each_error_class_answers_with_what_it_declares(cls: type[E.HybridMemError]) -> None:
    status, type_, headers = CONTRACT[cls]
    assert (cls.http_status, cls.error_type) == (status, type_)
    with _raising(_instance(cls)) as client:
        r = client.get("/boom")
    err = assert_error(r, status, type_)
    assert "upstream said no" in err["message"]
    for name, value in headers.items():
        assert r.headers[name] == value
    assert ("www-authenticate" in r.headers) == ("www-authenticate" in headers)
    assert ("retry-after" in r.headers) == ("retry-after" in headers)


def test_embedder_mismatch_is_409() -> None:
    with _raising(E.EmbedderMismatchError("hash:256", 256, "e5", 384)) as client:
        err = assert_error(client.get("/boom"), 409, "embedder_mismatch")
    assert "hybridmem reembed" in err["message"]


def test_every_error_class_in_the_tree_has_a_contract_row() -> None:
    def walk(cls: type) -> list[type]:
        return [cls, *(c for sub in cls.__subclasses__() for c in walk(sub))]

    known = set(CONTRACT) | {E.EmbedderMismatchError}
    # classes other tests define on the fly are not part of the contract
    tree = {c for c in walk(E.HybridMemError) if c.__module__.startswith("hybridmem.")}
    assert tree <= known, sorted(c.__name__ for c in tree - known)
