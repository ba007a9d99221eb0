"""The ChatModel protocol and the shared provider base (retries, structured output with one repair
attempt, usage accounting); spec strings are mapped to providers by :mod:`hybridmem.llm.registry`."""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypedDict, cast, runtime_checkable

from pydantic import BaseModel
from pydantic import ValidationError as PydanticError

from ..errors import LLMError, ValidationError
from ..models import LLMCall, Usage
from ..retry import RetryPolicy, call_with_retry

__all__ = [
    "BASE_URL_ENV",
    "BaseChatModel",
    "ChatModel",
    "Completion",
    "Message",
    "Reply",
    "json_schema",
    "parse_structured",
]

log = logging.getLogger(__name__)
log.addHandler(logging.NullHandler())

#: one endpoint for whichever provider is configured (a local server, a proxy, a test double)
BASE_URL_ENV = "HYBRIDMEM_LLM_BASE_URL"
_REPAIR_PROMPT = (
    "Your previous reply is not valid: {error}\n"
    "Reply again with only the corrected JSON object, no prose and no code fences. "
    "It must match this JSON schema:\n{schema}"
)


class Message(TypedDict):
    role: Literal["system", "user", "assistant"]
    content: str


@dataclass
class Completion:
    """What one ``complete`` returns: the text, the validated object when a schema was given, and
    the usage of every call it took (a repair attempt included)."""

    text: str
    data: BaseModel | None
    usage: Usage
    model: str


@runtime_checkable
class ChatModel(Protocol):
    """A chat model. ``name`` is ``provider:model`` (what responses report as the answerer or
    reranker). With ``schema`` (a pydantic model), the reply is requested in the provider's
    structured-output form, validated, repaired once if invalid, and returned in ``data``.
    Failures raise :class:`~hybridmem.errors.LLMError` carrying the usage spent so far."""

    name: str

    def complete(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None, purpose: str | None = None
    ) -> Completion: ...

    async def acomplete(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None, purpose: str | None = None
    ) -> Completion: ...


@dataclass
class Reply:
    """One provider response, reduced to what the pipeline needs."""

    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


# ------------------------------------------------------------------------------ structured output
def json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema with ``$ref``s inlined and ``title``/``default`` keywords dropped:
    the lowest common denominator of the three providers' schema dialects."""
    raw = model.model_json_schema()
    defs = raw.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(x) for x in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            return walk(defs[node["$ref"].rsplit("/", 1)[-1]])
        out: dict[str, Any] = {}
        for k, v in node.items():
            if k in ("title", "default"):
                continue
            # property names are data, not keywords: a field called "title" must survive
            out[k] = {name: walk(sub) for name, sub in v.items()} if k == "properties" else walk(v)
        return out

    return cast(dict[str, Any], walk(raw))


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """OpenAI strict mode: every object closed and every property required."""
    if isinstance(schema, list):
        return [strict_schema(x) for x in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {
        k: ({n: strict_schema(s) for n, s in v.items()} if k == "properties" else strict_schema(v))
        for k, v in schema.items()
    }
    if out.get("type") == "object":
        out["additionalProperties"] = False
        out["required"] = list(out.get("properties", {}))
    return out


def schema_name(model: type[BaseModel]) -> str:
    # OpenAI and Anthropic want ^[a-zA-Z0-9_-]{1,64}$
    return re.sub(r"[^a-zA-Z0-9_-]", "_", model.__name__)[:64] or "output"


class InvalidOutput(Exception):
    """The reply is not JSON, or not JSON of the schema."""


_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


def _loads_lenient(text: str) -> Any:
    """JSON as is, or inside a code fence, or the outermost ``{...}`` of a reply wrapped in prose
    (servers that ignore the requested response format)."""
    candidates = [text]
    m = _FENCE.match(text)
    if m:
        candidates.append(m.group(1))
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    first: json.JSONDecodeError | None = None
    for c in candidates:
        try:
            return json.loads(c)
        except json.JSONDecodeError as e:
            first = first or e
        except RecursionError:
            raise InvalidOutput("JSON nested too deeply") from None
    snippet = text.strip()[:200]
    if not snippet:
        raise InvalidOutput("the reply is empty; a JSON object was expected")
    assert first is not None
    raise InvalidOutput(f"not valid JSON ({first.msg} at line {first.lineno} column {first.colno}): {snippet!r}")


def parse_structured(text: str, schema: type[BaseModel]) -> BaseModel:
    obj = _loads_lenient(text)
    try:
        return schema.model_validate(obj)
    except PydanticError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or '(root)'}: {err['msg']}" for err in e.errors()[:5])
        raise InvalidOutput(f"JSON does not match the schema: {problems}") from None


# ------------------------------------------------------------------------------ provider base
class BaseChatModel:
    """Shared by every provider: message checks, retries, structured output with one repair
    attempt, per-call usage. A provider implements ``_request`` (one HTTP request)."""

    provider: str = "base"
    default_base_url: str = ""
    #: environment variables holding the key, first found wins
    key_envs: tuple[str, ...] = ()
    #: provider-specific base-URL variables, read after HYBRIDMEM_LLM_BASE_URL
    base_url_envs: tuple[str, ...] = ()

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        retry: RetryPolicy | None = None,
        temperature: float | None = 0.0,
        max_tokens: int | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ValidationError(f"{self.provider}: needs a model name, e.g. {self.provider}:MODEL", field="llm")
        if not timeout > 0:
            raise ValidationError(f"timeout must be > 0, got {timeout!r}", field="llm")
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
            raise ValidationError(f"max_tokens must be an integer >= 1, got {max_tokens!r}", field="llm")
        env_url = next((os.environ[e] for e in (BASE_URL_ENV, *self.base_url_envs) if os.environ.get(e)), None)
        url = (base_url or env_url or self.default_base_url).strip().rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise ValidationError(f"base_url must start with http:// or https://, got {url!r}", field="llm")
        self.model = model.strip()
        self.name = f"{self.provider}:{self.model}"
        self.base_url = url
        # an empty variable counts as unset, so local servers work with OPENAI_API_KEY="" exported
        self._api_key = api_key or next((os.environ[e] for e in self.key_envs if os.environ.get(e)), None)
        if not self._api_key and url == self.default_base_url.rstrip("/"):
            # never call a paid API anonymously by accident, and say which variable is missing
            raise LLMError(
                f"{self.name}: no API key; set {' or '.join(self.key_envs)} "
                f"(or point {BASE_URL_ENV} at a server that needs none)"
            )
        self.timeout = float(timeout)
        self.retry = retry or RetryPolicy()
        self.temperature = temperature
        self.max_tokens = max_tokens

    def __repr__(self) -> str:  # never shows the key
        return f"<{type(self).__name__} {self.name} base_url={self.base_url}>"

    @property
    def auth_hint(self) -> str:
        return f"check {' / '.join(self.key_envs)}" if self.key_envs else ""

    # -- provider hook -------------------------------------------------------------------------
    def _request(self, messages: list[Message], schema: type[BaseModel] | None, timeout: float) -> Reply:
        raise NotImplementedError  # pragma: no cover

    # -- the protocol --------------------------------------------------------------------------
    def complete(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None, purpose: str | None = None
    ) -> Completion:
        msgs = _check_messages(messages)
        usage = Usage()
        text = self._call(msgs, schema, purpose, usage)
        if schema is None:
            return Completion(text=text, data=None, usage=usage, model=self.name)
        try:
            data = parse_structured(text, schema)
        except InvalidOutput as first:
            log.info("%s: invalid structured output (%s); one repair attempt", self.name, first)
            repair: list[Message] = [
                *msgs,
                {"role": "assistant", "content": text[:8000]},
                {
                    "role": "user",
                    "content": _REPAIR_PROMPT.format(
                        error=first, schema=json.dumps(json_schema(schema), ensure_ascii=False)
                    ),
                },
            ]
            text = self._call(repair, schema, f"{purpose or 'call'}:repair", usage)
            try:
                data = parse_structured(text, schema)
            except InvalidOutput as second:
                raise LLMError(f"{self.name}: invalid output after one repair attempt: {second}", usage=usage) from None
        return Completion(text=text, data=data, usage=usage, model=self.name)

    async def acomplete(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None, purpose: str | None = None
    ) -> Completion:
        import asyncio  # noqa: PLC0415 - only the async path needs it

        return await asyncio.to_thread(self.complete, messages, schema=schema, purpose=purpose)

    def _call(self, msgs: list[Message], schema: type[BaseModel] | None, purpose: str | None, usage: Usage) -> str:
        attempts = 0

        def attempt(timeout: float) -> Reply:
            nonlocal attempts
            attempts += 1
            return self._request(msgs, schema, timeout)

        t0 = time.perf_counter()
        try:
            reply = call_with_retry(attempt, self.retry, timeout=self.timeout, what=self.name)
        except LLMError as e:
            usage.record(
                LLMCall(
                    model=self.name,
                    purpose=purpose,
                    latency_ms=_ms(t0),
                    attempts=max(attempts, 1),
                    ok=False,
                    error=str(e)[:500],
                )
            )
            e.usage = usage
            raise
        usage.record(
            LLMCall(
                model=self.name,
                purpose=purpose,
                prompt_tokens=reply.prompt_tokens,
                completion_tokens=reply.completion_tokens,
                latency_ms=_ms(t0),
                attempts=attempts,
            )
        )
        return reply.text


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 3)


def _check_messages(messages: Sequence[Message]) -> list[Message]:
    msgs = list(messages)
    if not msgs:
        raise ValidationError("a chat needs at least one message", field="messages")
    for m in msgs:
        if (
            not isinstance(m, Mapping)
            or m.get("role") not in ("system", "user", "assistant")
            or not isinstance(m.get("content"), str)
        ):
            raise ValidationError(
                f"each message is {{role: system|user|assistant, content: str}}, got {m!r}", field="messages"
            )
    return msgs


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None
