"""The LLM layer over real HTTP: each provider client against a local server speaking its wire
format — parsing, structured output and its one repair, retries (429 + Retry-After, 5xx, timeouts),
clear errors, usage accounting — plus the retry policy and the spec registry."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel, Field

from hybridmem.errors import LLMError, ValidationError
from hybridmem.llm import (
    ChatModel,
    Retryable,
    RetryPolicy,
    call_with_retry,
    create_chat_model,
    resolve_llm,
)
from hybridmem.llm.base import json_schema, parse_structured, strict_schema
from hybridmem.llm.gemini import gemini_schema
from llm_fakes import FAST, FakeLLMServer, Scripted, ScriptedChatModel


class Verdict(BaseModel):
    ids: list[str]
    confident: bool = Field(description="how sure")


PROVIDERS = ["openai", "gemini", "anthropic"]


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as s:
        yield s


def model_for(provider: str, server: FakeLLMServer, **kw: Any) -> ChatModel:
    base = f"{server.url}/v1" if provider == "openai" else server.url
    kw.setdefault("retry", FAST)
    kw.setdefault("timeout", 5.0)
    return create_chat_model(f"{provider}:test-model", base_url=base, api_key="sk-test", **kw)


MSGS = [{"role": "system", "content": "be terse"}, {"role": "user", "content": "rank these"}]


# ------------------------------------------------------------------------ wire formats
@pytest.mark.parametrize("provider", PROVIDERS)
def test_structured_reply_is_parsed_validated_and_counted(provider: str, server: FakeLLMServer) -> None:
    server.script = [Scripted(text='{"ids": ["b", "a"], "confident": true}', usage=(120, 9))]
    out = model_for(provider, server).complete(MSGS, schema=Verdict, purpose="rerank")
    assert out.data == Verdict(ids=["b", "a"], confident=True)
    assert out.model == f"{provider}:test-model"
    u = out.usage
    assert (u.calls, u.http_requests, u.prompt_tokens, u.completion_tokens, u.total_tokens) == (1, 1, 120, 9, 129)
    assert u.per_call[0].purpose == "rerank" and u.per_call[0].ok and u.per_call[0].latency_ms > 0
    assert len(server.requests) == 1


def test_openai_request_shape(server: FakeLLMServer) -> None:
    server.script = [Scripted(text='{"ids": [], "confident": false}')]
    model_for("openai", server).complete(MSGS, schema=Verdict)
    seen = server.requests[0]
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == "Bearer sk-test"
    body = seen.body
    assert body["model"] == "test-model" and body["temperature"] == 0
    assert body["messages"] == MSGS  # system stays a message
    rf = body["response_format"]
    assert (
        rf["type"] == "json_schema" and rf["json_schema"]["name"] == "Verdict" and rf["json_schema"]["strict"] is True
    )
    schema = rf["json_schema"]["schema"]
    assert schema["additionalProperties"] is False and schema["required"] == [
        "ids",
        "confident",
    ]  # strict: all required
    assert "title" not in schema and schema["properties"]["confident"]["description"] == "how sure"


def test_gemini_request_shape(server: FakeLLMServer) -> None:
    server.script = [Scripted(text='{"ids": [], "confident": false}')]
    model_for("gemini", server).complete(
        [*MSGS, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "again"}], schema=Verdict
    )
    seen = server.requests[0]
    assert seen.path == "/v1beta/models/test-model:generateContent"
    assert seen.headers["x-goog-api-key"] == "sk-test" and "authorization" not in seen.headers
    body = seen.body
    assert body["systemInstruction"] == {"parts": [{"text": "be terse"}]}
    assert [c["role"] for c in body["contents"]] == ["user", "model", "user"]
    cfg = body["generationConfig"]
    assert cfg["responseMimeType"] == "application/json" and cfg["temperature"] == 0
    assert cfg["responseSchema"] == {
        "type": "OBJECT",
        "properties": {
            "ids": {"type": "ARRAY", "items": {"type": "STRING"}},
            "confident": {"type": "BOOLEAN", "description": "how sure"},
        },
        "propertyOrdering": ["ids", "confident"],
        "required": ["ids", "confident"],
    }


def test_anthropic_request_shape_is_a_forced_tool(server: FakeLLMServer) -> None:
    server.script = [Scripted(text='{"ids": ["x"], "confident": true}')]
    out = model_for("anthropic", server).complete(MSGS, schema=Verdict)
    assert out.data == Verdict(ids=["x"], confident=True)
    seen = server.requests[0]
    assert seen.path == "/v1/messages"
    assert seen.headers["x-api-key"] == "sk-test" and seen.headers["anthropic-version"] == "2023-06-01"
    body = seen.body
    assert body["system"] == "be terse" and body["messages"] == [{"role": "user", "content": "rank these"}]
    assert body["max_tokens"] >= 256
    assert body["tools"][0]["name"] == "Verdict" and body["tools"][0]["input_schema"]["type"] == "object"
    assert body["tool_choice"] == {"type": "tool", "name": "Verdict"}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_plain_text_completion(provider: str, server: FakeLLMServer) -> None:
    server.script = [Scripted(text="Bonjour.")]
    out = model_for(provider, server).complete([{"role": "user", "content": "salut"}])
    assert out.text == "Bonjour." and out.data is None
    body = server.requests[0].body
    assert "response_format" not in body and "tools" not in body and "responseSchema" not in json.dumps(body)


# ------------------------------------------------------------------------ repair
@pytest.mark.parametrize("provider", PROVIDERS)
def test_invalid_json_is_repaired_once(provider: str, server: FakeLLMServer) -> None:
    server.script = [
        Scripted(text='{"ids": ["a", oops', usage=(50, 5)),
        Scripted(text='{"ids": ["a"], "confident": false}', usage=(80, 6)),
    ]
    out = model_for(provider, server).complete(MSGS, schema=Verdict, purpose="rerank")
    assert out.data == Verdict(ids=["a"], confident=False)
    assert len(server.requests) == 2
    repair_prompt = server.requests[1].prompt
    assert '{"ids": ["a", oops' in repair_prompt  # the invalid output is sent back...
    assert "not valid JSON" in repair_prompt and '"confident"' in repair_prompt  # ...with the error and schema
    assert [c.purpose for c in out.usage.per_call] == ["rerank", "rerank:repair"]
    assert (out.usage.calls, out.usage.prompt_tokens, out.usage.completion_tokens) == (2, 130, 11)


def test_schema_mismatch_is_repaired_with_the_validation_error(server: FakeLLMServer) -> None:
    server.script = [Scripted(text='{"ids": "a"}'), Scripted(text='{"ids": ["a"], "confident": true}')]
    out = model_for("openai", server).complete(MSGS, schema=Verdict)
    assert out.data.ids == ["a"]
    prompt = server.requests[1].prompt
    assert "does not match the schema" in prompt and "confident" in prompt


@pytest.mark.parametrize("provider", PROVIDERS)
def test_still_invalid_after_repair_is_a_clear_error_with_usage(provider: str, server: FakeLLMServer) -> None:
    server.script = [Scripted(text="I think a is best"), Scripted(text="still prose")]
    with pytest.raises(LLMError, match="invalid output after one repair attempt") as ei:
        model_for(provider, server).complete(MSGS, schema=Verdict)
    assert len(server.requests) == 2  # exactly one repair, no more
    assert ei.value.usage.calls == 2 and ei.value.usage.total_tokens == 36


def test_lenient_parsing_of_fenced_or_wrapped_json() -> None:
    assert parse_structured('```json\n{"ids": ["a"], "confident": true}\n```', Verdict).ids == ["a"]
    assert parse_structured('Sure! {"ids": [], "confident": false} Hope it helps.', Verdict).ids == []
    with pytest.raises(Exception, match="empty"):
        parse_structured("  ", Verdict)


# ------------------------------------------------------------------------ retries
@pytest.mark.parametrize("provider", PROVIDERS)
def test_429_with_retry_after_is_honoured(provider: str, server: FakeLLMServer) -> None:
    server.script = [
        Scripted(status=429, headers={"Retry-After": "0.3"}),
        Scripted(text='{"ids": [], "confident": true}'),
    ]
    t0 = time.monotonic()
    out = model_for(provider, server).complete(MSGS, schema=Verdict)
    elapsed = time.monotonic() - t0
    assert out.data.confident is True
    assert len(server.requests) == 2
    assert elapsed >= 0.3  # waited what the server asked (FAST's own backoff is ~10 ms)
    assert out.usage.http_requests == 2 and out.usage.calls == 1


def test_retry_after_is_capped(server: FakeLLMServer) -> None:
    server.script = [Scripted(status=429, headers={"Retry-After": "3600"}), Scripted(text="ok")]
    policy = RetryPolicy(max_attempts=2, backoff=0.01, max_retry_after=0.2, total_timeout=10)
    t0 = time.monotonic()
    assert model_for("openai", server, retry=policy).complete(MSGS).text == "ok"
    assert time.monotonic() - t0 < 2.0


def test_5xx_then_success_and_exhaustion(server: FakeLLMServer) -> None:
    server.script = [Scripted(status=500), Scripted(status=503), Scripted(text="fine")]
    assert model_for("gemini", server).complete(MSGS).text == "fine"
    assert len(server.requests) == 3
    server.script = [Scripted(status=500)] * 3
    with pytest.raises(LLMError, match=r"failed after 3 attempt\(s\): HTTP 500: scripted HTTP 500") as ei:
        model_for("anthropic", server).complete(MSGS)
    assert len(server.requests) == 6  # FAST allows 3 attempts, no more
    call = ei.value.usage.per_call[0]
    assert call.ok is False and call.attempts == 3 and "HTTP 500" in call.error


def test_anthropic_overloaded_529_is_retried(server: FakeLLMServer) -> None:
    server.script = [
        Scripted(status=529, body={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        Scripted(text="ok"),
    ]
    assert model_for("anthropic", server).complete(MSGS).text == "ok"
    assert len(server.requests) == 2


def test_slow_reply_past_the_timeout_is_retried(server: FakeLLMServer) -> None:
    server.script = [Scripted(text="late", delay=1.0), Scripted(text="on time")]
    out = model_for("openai", server, timeout=0.3).complete(MSGS)
    assert out.text == "on time"
    assert out.usage.per_call[0].attempts == 2


def test_total_time_budget_bounds_retries(server: FakeLLMServer) -> None:
    server.script = [Scripted(status=429, headers={"Retry-After": "5"})]
    policy = RetryPolicy(max_attempts=5, backoff=0.01, max_retry_after=30, total_timeout=1.0)
    t0 = time.monotonic()
    with pytest.raises(LLMError, match="exceed the 1s time budget"):
        model_for("openai", server, retry=policy).complete(MSGS)
    assert time.monotonic() - t0 < 0.9  # gave up at once rather than sleeping past the budget
    assert len(server.requests) == 1


@pytest.mark.parametrize(("status", "needle"), [(400, "HTTP 400"), (401, "check OPENAI_API_KEY"), (404, "HTTP 404")])
def test_client_errors_are_not_retried(server: FakeLLMServer, status: int, needle: str) -> None:
    server.script = [Scripted(status=status, body={"error": {"message": "model not found or bad key"}})]
    with pytest.raises(LLMError, match=needle) as ei:
        model_for("openai", server).complete(MSGS)
    assert "model not found or bad key" in str(ei.value)
    assert len(server.requests) == 1


def test_connection_refused_is_retried_then_reported() -> None:
    with FakeLLMServer() as s:
        url = s.url
    m = create_chat_model("openai:x", base_url=url + "/v1", retry=FAST, timeout=1)
    with pytest.raises(LLMError, match=r"failed after 3 attempt\(s\): connection error"):
        m.complete(MSGS)


def test_openai_server_without_json_schema_support_falls_back_to_prompting(server: FakeLLMServer) -> None:
    server.script = [
        Scripted(status=400, body={"error": {"message": "unknown field response_format"}}),
        Scripted(text='{"ids": ["a"], "confident": true}'),
        Scripted(text='{"ids": ["b"], "confident": true}'),
    ]
    m = model_for("openai", server)
    assert m.complete(MSGS, schema=Verdict).data.ids == ["a"]
    assert "response_format" in server.requests[0].body and "response_format" not in server.requests[1].body
    assert m.complete(MSGS, schema=Verdict).data.ids == ["b"]  # remembered: asked by prompt only
    assert "response_format" not in server.requests[2].body


def test_odd_but_valid_wire_replies(server: FakeLLMServer) -> None:
    # Gemini thinking models put thoughts in flagged parts; only the answer counts, thoughts are billed
    server.script = [
        Scripted(
            body={
                "candidates": [
                    {"content": {"parts": [{"text": "hmm", "thought": True}, {"text": "yes"}]}, "finishReason": "STOP"}
                ],
                "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 1, "thoughtsTokenCount": 30},
            }
        )
    ]
    out = model_for("gemini", server).complete(MSGS)
    assert out.text == "yes" and out.usage.completion_tokens == 31
    # a server that reports no usage: tokens unknown, the call still counted
    server.script = [Scripted(body={"choices": [{"message": {"content": "hi"}}]})]
    out = model_for("openai", server).complete(MSGS)
    assert out.text == "hi" and out.usage.per_call[0].prompt_tokens is None and out.usage.calls == 1


@pytest.mark.parametrize(
    ("provider", "body", "needle"),
    [
        ("gemini", {"promptFeedback": {"blockReason": "SAFETY"}}, "prompt blocked: SAFETY"),
        ("openai", {"choices": [{"message": {"content": None, "refusal": "I can't"}}]}, "refused"),
        ("openai", {"object": "error"}, "no choices"),
        ("anthropic", {"content": [], "stop_reason": "refusal"}, "refused"),
    ],
)
def test_unusable_replies_are_clear_errors(server: FakeLLMServer, provider: str, body: dict, needle: str) -> None:
    server.script = [Scripted(body=body)]
    with pytest.raises(LLMError, match=needle):
        model_for(provider, server).complete(MSGS)
    assert len(server.requests) == 1


def test_non_json_body_is_a_clear_error(server: FakeLLMServer) -> None:
    server.script = [Scripted(body=b"<html>proxy error</html>")]
    with pytest.raises(LLMError, match="not JSON.*proxy error"):
        model_for("openai", server).complete(MSGS)


def test_async_twin(server: FakeLLMServer) -> None:
    import asyncio

    server.script = [Scripted(text="async ok")]
    assert asyncio.run(model_for("anthropic", server).acomplete(MSGS)).text == "async ok"


# ------------------------------------------------------------------------ retry policy (pure)
def test_backoff_is_exponential_with_jitter_and_capped() -> None:
    p = RetryPolicy(backoff=1.0, max_backoff=8.0, max_retry_after=30.0)
    rng = random.Random(7)
    for retry, step in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (6, 8.0)]:
        delays = {p.delay(retry, None, rng) for _ in range(50)}
        assert all(step / 2 <= d <= step for d in delays)
        assert len(delays) > 1  # jittered
    assert p.delay(1, 2.5) == 2.5 and p.delay(1, 600) == 30.0 and p.delay(1, -1) == 0.0


def test_call_with_retry_counts_and_passes_shrinking_timeouts() -> None:
    now = [0.0]
    timeouts: list[float] = []

    def fn(timeout: float) -> str:
        timeouts.append(timeout)
        now[0] += 4.0
        if len(timeouts) < 3:
            raise Retryable("HTTP 503")
        return "done"

    policy = RetryPolicy(max_attempts=4, backoff=1.0, max_backoff=1.0, total_timeout=20.0)
    out = call_with_retry(
        fn, policy, timeout=10.0, sleep=lambda s: now.__setitem__(0, now[0] + s), clock=lambda: now[0]
    )
    assert out == "done" and len(timeouts) == 3
    assert timeouts[0] == 10.0 and timeouts[2] < 20 - 8  # each request gets at most what remains


def test_non_retryable_errors_propagate_at_once() -> None:
    calls = []

    def fn(timeout: float) -> None:
        calls.append(timeout)
        raise LLMError("bad request")

    with pytest.raises(LLMError, match="bad request"):
        call_with_retry(fn, FAST, timeout=1.0)
    assert len(calls) == 1


@pytest.mark.parametrize("kwargs", [{"max_attempts": 0}, {"backoff": -1}, {"total_timeout": 0}, {"jitter": "full"}])
def test_retry_policy_validation(kwargs: dict) -> None:
    with pytest.raises(ValidationError):
        RetryPolicy(**kwargs)


# ------------------------------------------------------------------------ registry, keys, env
@pytest.mark.parametrize("spec", ["gpt-4o", "mistral:7b", "openai:", "openai", ":x", ""])
def test_bad_specs_are_validation_errors(spec: str) -> None:
    with pytest.raises(ValidationError, match="llm"):
        create_chat_model(spec)


@pytest.mark.parametrize(
    ("spec", "env"),
    [
        ("openai:gpt-4o-mini", "OPENAI_API_KEY"),
        ("gemini:gemini-2.0-flash", "GEMINI_API_KEY or GOOGLE_API_KEY"),
        ("anthropic:claude-3-5-haiku-latest", "ANTHROPIC_API_KEY"),
    ],
)
def test_official_endpoints_need_a_key(monkeypatch: pytest.MonkeyPatch, spec: str, env: str) -> None:
    for var in (
        "OPENAI_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "ANTHROPIC_API_KEY",
        "HYBRIDMEM_LLM_BASE_URL",
        "OPENAI_BASE_URL",
        "GOOGLE_GEMINI_BASE_URL",
        "ANTHROPIC_BASE_URL",
    ):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(LLMError, match=f"no API key; set {env}"):
        create_chat_model(spec)


def test_keys_and_endpoints_from_env(monkeypatch: pytest.MonkeyPatch, server: FakeLLMServer) -> None:
    monkeypatch.setenv("HYBRIDMEM_LLM_BASE_URL", server.url)
    monkeypatch.setenv("GOOGLE_API_KEY", "from-env")
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    m = create_chat_model("gemini:models/gemini-x", retry=FAST)
    server.script = [Scripted(text="hi")]
    assert m.complete(MSGS).text == "hi"
    assert server.requests[0].headers["x-goog-api-key"] == "from-env"
    assert server.requests[0].path == "/v1beta/models/gemini-x:generateContent"
    assert "from-env" not in repr(m)  # a key is never shown


def test_local_openai_compatible_server_needs_no_key(monkeypatch: pytest.MonkeyPatch, server: FakeLLMServer) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "")  # exported but empty counts as unset
    m = create_chat_model("openai:llama3.1", base_url=f"{server.url}/v1", retry=FAST)
    server.script = [Scripted(text="hello")]
    assert m.complete(MSGS).text == "hello"
    assert "authorization" not in server.requests[0].headers


def test_env_options(monkeypatch: pytest.MonkeyPatch, server: FakeLLMServer) -> None:
    monkeypatch.setenv("HYBRIDMEM_LLM_TEMPERATURE", "none")
    monkeypatch.setenv("HYBRIDMEM_LLM_TIMEOUT", "12.5")
    m = model_for("openai", server)
    assert m.timeout == 5.0  # explicit argument wins over the environment
    m = create_chat_model("openai:x", base_url=server.url, retry=FAST)
    assert m.timeout == 12.5
    server.script = [Scripted(text="t")]
    m.complete(MSGS)
    assert "temperature" not in server.requests[0].body
    monkeypatch.setenv("HYBRIDMEM_LLM_TIMEOUT", "soon")
    with pytest.raises(ValidationError, match="HYBRIDMEM_LLM_TIMEOUT"):
        create_chat_model("openai:x", base_url=server.url)


def test_resolve_llm_never_defaults_to_a_paid_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HYBRIDMEM_LLM", raising=False)
    assert resolve_llm(None) is None
    monkeypatch.setenv("HYBRIDMEM_LLM", "none")
    assert resolve_llm(None) is None
    monkeypatch.setenv("HYBRIDMEM_LLM", "openai:local")
    monkeypatch.setenv("HYBRIDMEM_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    assert resolve_llm(None).name == "openai:local"
    assert resolve_llm("off") is None  # an explicit "none" wins over the environment
    double = ScriptedChatModel([])
    assert resolve_llm(double) is double and isinstance(double, ChatModel)
    with pytest.raises(ValidationError):
        resolve_llm(42)  # type: ignore[arg-type]


def test_messages_are_checked() -> None:
    m = ScriptedChatModel(["x"])
    with pytest.raises(ValidationError, match="messages"):
        m.complete([])
    with pytest.raises(ValidationError, match="role"):
        m.complete([{"role": "tool", "content": "x"}])  # type: ignore[list-item]


def test_schema_dialects() -> None:
    class Inner(BaseModel):
        title: str  # a *property* named title must survive title-stripping

    class Outer(BaseModel):
        items: list[Inner]
        note: str | None = None

    s = json_schema(Outer)
    assert "$defs" not in json.dumps(s) and "$ref" not in json.dumps(s)
    assert s["properties"]["items"]["items"]["properties"] == {"title": {"type": "string"}}
    strict = strict_schema(s)
    assert (
        strict["required"] == ["items", "note"]
        and strict["properties"]["items"]["items"]["additionalProperties"] is False
    )
    g = gemini_schema(s)
    assert g["properties"]["note"] == {"type": "STRING", "nullable": True}
    assert "additionalProperties" not in json.dumps(g)
