"""Test doubles for the LLM layer (not part of the package).

``FakeLLMServer``: a real HTTP server on 127.0.0.1 that speaks the three providers' wire formats
(OpenAI chat completions, Gemini generateContent, Anthropic messages) with scripted replies, so the
real provider clients are tested over HTTP. ``ScriptedChatModel``: an in-process ChatModel behind
the same protocol (it reuses the shared base: retries, structured output, repair, usage).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pydantic import BaseModel

from hybridmem.llm.base import BaseChatModel, Message, Reply
from hybridmem.retry import RetryPolicy

#: fast retries for tests: milliseconds, not seconds
FAST = RetryPolicy(max_attempts=3, backoff=0.01, max_backoff=0.05, max_retry_after=1.0, total_timeout=10.0)


@dataclass
class Scripted:
    """One scripted server reply. ``text`` is the model's output, wrapped in the wire format of
    the endpoint called; ``body`` (dict or bytes) replaces the whole response; ``status`` != 200
    sends an error."""

    text: str | None = None
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    usage: tuple[int, int] = (11, 7)


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def provider(self) -> str:
        if self.path.endswith("/chat/completions"):
            return "openai"
        if ":generateContent" in self.path:
            return "gemini"
        return "anthropic"

    @property
    def prompt(self) -> str:
        """Every message text of the request, concatenated (whatever the provider)."""
        b = self.body
        if self.provider == "gemini":
            parts = [p.get("text", "") for c in b.get("contents", []) for p in c.get("parts", [])]
            parts += [p.get("text", "") for p in (b.get("systemInstruction") or {}).get("parts", [])]
            return "\n".join(parts)
        texts = [m["content"] for m in b.get("messages", []) if isinstance(m.get("content"), str)]
        return "\n".join([b.get("system", "")] + texts if isinstance(b.get("system"), str) else texts)

    @property
    def schema_name(self) -> str | None:
        b = self.body
        if self.provider == "openai":
            return ((b.get("response_format") or {}).get("json_schema") or {}).get("name")
        if self.provider == "anthropic":
            return (b.get("tool_choice") or {}).get("name")
        return "json" if (b.get("generationConfig") or {}).get("responseMimeType") == "application/json" else None


class FakeLLMServer:
    """Scripted replies are consumed in order; when the script is empty, ``responder(seen)`` (if
    set) produces the model's text, else the reply is ``{}``."""

    def __init__(self) -> None:
        self.script: list[Scripted] = []
        self.requests: list[Seen] = []
        self.responder: Callable[[Seen], str | Scripted] | None = None
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "FakeLLMServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _next(self, seen: Seen) -> Scripted:
        with self._lock:
            self.requests.append(seen)
            if self.script:
                return self.script.pop(0)
        if self.responder is not None:
            out = self.responder(seen)
            return out if isinstance(out, Scripted) else Scripted(text=out)
        return Scripted(text="{}")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                seen = Seen(self.path, {k.lower(): v for k, v in self.headers.items()}, json.loads(raw))
                reply = server._next(seen)
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.body is not None:
                    payload = reply.body
                elif reply.status != 200:
                    payload = {"error": {"message": f"scripted HTTP {reply.status}", "type": "test"}}
                else:
                    payload = wire_reply(seen, reply)
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                    pass

        return Handler


def wire_reply(seen: Seen, reply: Scripted) -> dict[str, Any]:
    """The model text ``reply.text`` as the endpoint's provider would send it."""
    text, (p, c) = reply.text or "", reply.usage
    if seen.provider == "openai":
        return {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "model": seen.body.get("model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c},
        }
    if seen.provider == "gemini":
        return {
            "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": p, "candidatesTokenCount": c, "totalTokenCount": p + c},
        }
    tools = seen.body.get("tools") or []
    try:
        obj = json.loads(text)
    except ValueError:
        obj = None
    if tools and isinstance(obj, dict):  # a forced tool call carries an object; anything else is text
        block = {"type": "tool_use", "id": "toolu_test", "name": tools[0]["name"], "input": obj}
        stop = "tool_use"
    else:
        block, stop = {"type": "text", "text": text}, "end_turn"
    return {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": seen.body.get("model"),
        "content": [block],
        "stop_reason": stop,
        "usage": {"input_tokens": p, "output_tokens": c},
    }


_ID_LINE = re.compile(r"^\[([^\]\n]+)\]", re.M)


def candidate_ids(seen: Seen) -> list[str]:
    """The ``[id]`` lines of a rerank or answer prompt, in prompt order."""
    return _ID_LINE.findall(seen.prompt)


class ScriptedChatModel(BaseChatModel):
    """TEST DOUBLE: an in-process ChatModel whose replies are scripted. Each item of ``replies`` is
    the model's text, an exception to raise, or a callable ``(messages) -> text``."""

    provider = "scripted"

    def __init__(self, replies: list[Any], **kwargs: Any) -> None:
        super().__init__(
            "test", base_url="http://scripted.invalid", api_key="unused", retry=kwargs.pop("retry", FAST), **kwargs
        )
        self.replies = list(replies)
        self.seen: list[list[Message]] = []

    def _request(self, messages: list[Message], schema: type[BaseModel] | None, timeout: float) -> Reply:
        self.seen.append(messages)
        item = self.replies.pop(0) if self.replies else "{}"
        if isinstance(item, BaseException):
            raise item
        text = item(messages) if callable(item) else item
        return Reply(text=text, prompt_tokens=100, completion_tokens=10)
