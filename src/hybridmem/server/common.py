"""What the HTTP API and the MCP server share (neither FastAPI nor the MCP SDK is needed here):
grounded answers, the request log (ids, one line per request, tracebacks of 5xx) and its
formats, and two plain ASGI guards: :class:`LoopbackGuard` (Host and Origin) and :class:`KeyAuth`
(API keys, for the MCP endpoint; the HTTP API authenticates through FastAPI's security deps).

Logging is stdlib ``logging``: ``hybridmem.server.access`` has one line per request (request id,
tenant, method, route, status, ms), ``hybridmem.server.errors`` the exception and traceback of every
5xx, both with the request's id. :func:`configure_logging` sends them (and uvicorn's and the MCP
SDK's) to stderr, as ``text`` (key=value) or ``json`` (one object per line).
"""

from __future__ import annotations

import datetime as _dt
import inspect
import json
import logging
import re
import sys
import time
import uuid
from collections.abc import Callable, Mapping, MutableMapping
from contextvars import ContextVar
from typing import IO, Any

from ..errors import HybridMemError, ValidationError
from .auth import AuthError, HostPolicy, KeyRing, api_key
from .limits import ERROR_KEY, error_body

__all__ = [
    "ANONYMOUS",
    "PRINCIPAL_KEY",
    "REQUEST_ID_KEY",
    "TENANT_KEY",
    "JsonFormatter",
    "KeyAuth",
    "LoopbackGuard",
    "NotImplementedOnServer",
    "RequestLog",
    "TextFormatter",
    "ask",
    "configure_logging",
    "dotted",
    "forget",
    "log_failure",
    "request_id",
    "supersede",
]

#: scope keys: the request's id, its tenant (a key id or "anonymous", for the log), its Principal
REQUEST_ID_KEY = "hybridmem.request_id"
TENANT_KEY = "hybridmem.tenant"
PRINCIPAL_KEY = "hybridmem.principal"
ANONYMOUS = "anonymous"
#: a client's X-Request-ID is kept when it is such a token (else a new id is made)
_SANE_ID = re.compile(r"[A-Za-z0-9_.:+/=@-]{1,64}")
_CONVERTER = re.compile(r":\w+}")  # /v1/memories/{doc_id:path} -> /v1/memories/{doc_id}
#: the request being served (for log records made without an explicit request_id)
current_request_id: ContextVar[str | None] = ContextVar("hybridmem_request_id", default=None)

access_log = logging.getLogger("hybridmem.server.access")
errors_log = logging.getLogger("hybridmem.server.errors")
for _logger in (access_log, errors_log):
    _logger.addHandler(logging.NullHandler())


class NotImplementedOnServer(HybridMemError):
    """This hybridmem version lacks what the request needs (HTTP 501)."""

    http_status = 501
    error_type = "not_implemented"


def ask(memory: Any, question: str, **options: Any) -> Any:
    """``memory.ask(question, ...)`` with the options that memory's ``ask`` accepts (an option that
    is None is left to ``ask``'s default); :class:`NotImplementedOnServer` when it has no ``ask``.
    A problem with the question is named ``question`` (``ask`` searches with it as ``search_text``)."""
    fn = getattr(memory, "ask", None)
    if fn is None:
        raise NotImplementedOnServer("grounded answers are not available in this hybridmem version")
    params = inspect.signature(fn).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    try:
        return fn(question, **{k: v for k, v in options.items() if v is not None and (takes_any or k in params)})
    except ValidationError as e:
        if e.field != "search_text":
            raise
        message = str(e).removeprefix("search_text: ").replace("search_text", "question")
        raise ValidationError(message, field="question") from None


def dotted(e: ValidationError) -> ValidationError:
    """``e`` with its field as the request validation of the HTTP API and the MCP tools names it:
    ``messages[2].metadata`` -> ``messages.2.metadata`` (the core's spelling is Python's)."""
    field = e.field
    if not field or "[" not in field:
        return e
    return ValidationError(str(e).removeprefix(f"{field}: "), field=re.sub(r"\[(\d+)\]", r".\1", field))


def embedding_field(e: ValidationError, batch: str | None = None) -> ValidationError:
    """``e`` with a precomputed vector named as the HTTP API and the MCP tools take it: the core's
    ``vector`` is ``embedding``, ``documents[3].vector`` is ``{batch}.3.embedding``."""
    field = e.field or ""
    m = re.fullmatch(r"(?:documents\[(\d+)\]\.)?vector", field)
    if m is None:
        return e
    named = f"{batch}.{m.group(1)}.embedding" if batch and m.group(1) is not None else "embedding"
    return ValidationError(str(e).removeprefix(f"{field}: "), field=named)


def supersede(memory: Any, doc_id: str, new: str | dict[str, Any], *, namespace: str, reason: str | None) -> Any:
    """``memory.supersede``; a problem with the new message is named ``message.FIELD`` (the core
    validates it as ``messages[0]``)."""
    try:
        return memory.supersede(doc_id, new, namespace=namespace, reason=reason)
    except ValidationError as e:
        field = e.field or ""
        if not (isinstance(new, dict) and field.startswith("messages[0]")):
            raise
        raise ValidationError(
            str(e).removeprefix(f"{field}: "), field="message" + field[len("messages[0]") :]
        ) from None


def forget(memory: Any, doc_id: str, *, namespace: str, reason: str | None) -> dict[str, Any]:
    """``memory.forget`` (a soft delete), then the version it retired (``history``'s last)."""
    memory.forget(doc_id, namespace=namespace, reason=reason)
    return dict(memory.history(doc_id, namespace=namespace)[-1])


# ---------------------------------------------------------------------------------------------- ASGI helpers


def _headers(scope: Mapping[str, Any]) -> dict[str, str]:
    """The request's headers, names in lower case (a repeated header: its last value)."""
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}


def request_id(scope: Mapping[str, Any]) -> str | None:
    return scope.get(REQUEST_ID_KEY)


def route_of(scope: Mapping[str, Any]) -> str:
    """The route template that served the request (bounded: never the raw path), or ``unmatched``."""
    path = getattr(scope.get("route"), "path", None)
    if path and scope.get("root_path") and not path.startswith(scope["root_path"]):
        path = scope["root_path"] + path  # a mounted app's route (the MCP endpoint)
    return _CONVERTER.sub("}", path) if path else "unmatched"


async def send_error(
    send: Callable[..., Any],
    scope: MutableMapping[str, Any],
    status: int,
    type_: str,
    message: str,
    headers: tuple[tuple[str, str], ...] = (),
) -> None:
    """Answer with the JSON error body of every error response."""
    scope[ERROR_KEY] = type_  # read by the metrics
    body = json.dumps(error_body(type_, message)).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


class LoopbackGuard:
    """Refuse a ``Host`` the server does not answer to (421: DNS rebinding) and a state-changing
    request from another site (403: ``Origin`` not this server, or ``Sec-Fetch-Site`` cross-site
    or same-site), before anything else runs. Requests without ``Origin`` (curl, SDKs) pass.
    ``every_method``: check reads too (the MCP endpoint)."""

    def __init__(self, app: Any, policy: HostPolicy, every_method: bool = False) -> None:
        self.app, self.policy, self.every_method = app, policy, every_method

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refused = self.policy.refusal(scope.get("method", "GET"), _headers(scope), self.every_method)
        if refused is None:
            await self.app(scope, receive, send)
            return
        status, message = refused
        await send_error(send, scope, status, "misdirected_request" if status == 421 else "forbidden", message)


class KeyAuth:
    """API keys over plain ASGI (the MCP endpoint): 401 without a valid key; the caller's
    :class:`~hybridmem.server.auth.Principal` is put in the scope (``PRINCIPAL_KEY``) for the
    tools to check namespaces against. With no key configured every caller is anonymous."""

    def __init__(self, app: Any, keys: KeyRing) -> None:
        self.app, self.keys = app, keys

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            principal = self.keys.authenticate(api_key(_headers(scope)))
        except AuthError as e:
            await send_error(send, scope, 401, e.error_type, str(e), e.http_headers)
            return
        scope[PRINCIPAL_KEY] = principal
        scope[TENANT_KEY] = principal.key_id
        await self.app(scope, receive, send)


class RequestLog:
    """Outermost middleware: gives every HTTP request an id — the client's ``X-Request-ID`` when
    it is a sane token (≤ 64 characters of ``A-Za-z0-9_.:+/=@-``), else a new one — sends it back
    as ``X-Request-ID`` on every response, and logs one line when the request ends."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        asked = _headers(scope).get("x-request-id", "")
        rid = asked if _SANE_ID.fullmatch(asked) else uuid.uuid4().hex
        scope[REQUEST_ID_KEY] = rid
        token = current_request_id.set(rid)
        t0 = time.perf_counter()
        status = 500

        async def send_with_id(msg: Any) -> None:
            nonlocal status
            if msg["type"] == "http.response.start":
                status = msg["status"]
                headers = [(k, v) for k, v in msg.get("headers") or [] if k.lower() != b"x-request-id"]
                msg = {**msg, "headers": [*headers, (b"x-request-id", rid.encode())]}
            await send(msg)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            _log_request(scope, status, (time.perf_counter() - t0) * 1000)
            current_request_id.reset(token)


def _log_request(scope: Mapping[str, Any], status: int, ms: float) -> None:
    route = route_of(scope)
    fields: dict[str, Any] = {
        "request_id": scope.get(REQUEST_ID_KEY),
        "tenant": scope.get(TENANT_KEY, ANONYMOUS),
        "method": scope.get("method"),
        "route": route,
        "status": status,
        "ms": round(ms, 1),
    }
    if route == "unmatched":
        fields["path"] = str(scope.get("path", ""))[:256]
    client = scope.get("client")
    if client:
        fields["client"] = client[0]
    access_log.info("request", extra=fields)


def log_failure(scope: Mapping[str, Any], status: int, exc: BaseException) -> None:
    """The exception behind a 5xx, with its traceback and the request's id (a 501, 503 or 504 is
    an answer the server meant: a warning; anything else an error)."""
    level = logging.WARNING if status in (501, 503, 504) else logging.ERROR
    errors_log.log(
        level,
        "%s %s failed with %d: %s",
        scope.get("method"),
        route_of(scope),
        status,
        type(exc).__name__,
        exc_info=exc,
        extra={
            "request_id": scope.get(REQUEST_ID_KEY),
            "tenant": scope.get(TENANT_KEY, ANONYMOUS),
            "status": status,
        },
    )


def with_request_id(message: str, scope: Mapping[str, Any]) -> str:
    """A 5xx's message, with the request id its log lines carry."""
    rid = scope.get(REQUEST_ID_KEY)
    return f"{message} (request id {rid})" if rid else message


# ---------------------------------------------------------------------------------------------- log formats

#: the structured fields a record may carry (``extra=``), in the order the text format prints them
FIELDS = ("request_id", "tenant", "method", "route", "path", "status", "ms", "client")
_BARE = re.compile(r"[\w.:/@+\-{}=,\[\]]+")


def _timestamp(record: logging.LogRecord) -> str:
    t = _dt.datetime.fromtimestamp(record.created, tz=_dt.timezone.utc)
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class RequestIdFilter(logging.Filter):
    """Give a record made while a request is served (without its own ``request_id``) that id."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            rid = current_request_id.get()
            if rid is not None:
                record.request_id = rid
        return True


class TextFormatter(logging.Formatter):
    """``TIME LEVEL LOGGER MESSAGE key=value…``, the traceback on the lines after; a value with
    spaces, quotes or control characters is JSON-quoted (a client cannot forge a log line)."""

    def format(self, record: logging.LogRecord) -> str:
        parts = [_timestamp(record), record.levelname, record.name, record.getMessage()]
        for name in FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                text = str(value)
                parts.append(f"{name}={text if _BARE.fullmatch(text) else json.dumps(text)}")
        line = " ".join(parts)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``time``, ``level``, ``logger``, ``message``, the structured
    fields, and ``exception`` (the traceback, newlines escaped)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                out[name] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def configure_logging(level: str = "info", fmt: str = "text", stream: IO[str] | None = None) -> logging.Handler:
    """Send hybridmem's logs, uvicorn's and the MCP SDK's (warnings and up, unless ``debug``) to
    ``stream`` (stderr) in ``fmt`` (``text`` or ``json``). Called again, it replaces its handler."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(RequestIdFilter())
    handler.set_name("hybridmem")
    lvl = logging.getLevelNamesMapping()[level.upper()]
    for name in ("hybridmem", "uvicorn", "mcp"):
        logger = logging.getLogger(name)
        for old in [h for h in logger.handlers if h.get_name() == "hybridmem"]:
            logger.removeHandler(old)
        logger.addHandler(handler)
        logger.setLevel(lvl if name != "mcp" or lvl <= logging.DEBUG else max(lvl, logging.WARNING))
        logger.propagate = False
    return handler
