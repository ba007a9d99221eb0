"""``anthropic:MODEL``: the Messages API (``POST {base}/v1/messages``), standard library only;
structured output via a forced tool call whose ``input_schema`` is the requested schema."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from ..errors import LLMError
from ._http import post_json
from .base import BaseChatModel, Message, Reply, _int, json_schema, schema_name

__all__ = ["ANTHROPIC_VERSION", "AnthropicChatModel"]

ANTHROPIC_VERSION = "2023-06-01"
#: the Messages API requires max_tokens; answers and id lists stay far below it
DEFAULT_MAX_TOKENS = 1024


class AnthropicChatModel(BaseChatModel):
    provider = "anthropic"
    default_base_url = "https://api.anthropic.com"
    key_envs = ("ANTHROPIC_API_KEY",)
    base_url_envs = ("ANTHROPIC_BASE_URL",)

    def __init__(self, model: str, **kwargs: Any) -> None:
        super().__init__(model, **kwargs)
        self.endpoint = f"{self.base_url}/v1/messages"

    def _request(self, messages: list[Message], schema: type[BaseModel] | None, timeout: float) -> Reply:
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens or DEFAULT_MAX_TOKENS,
            "messages": [{"role": m["role"], "content": m["content"]} for m in messages if m["role"] != "system"],
        }
        if system:
            body["system"] = system
        if self.temperature is not None:
            body["temperature"] = self.temperature
        tool = schema_name(schema) if schema is not None else None
        if schema is not None:
            body["tools"] = [
                {"name": tool, "description": f"Return the {tool} object.", "input_schema": json_schema(schema)}
            ]
            body["tool_choice"] = {"type": "tool", "name": tool}
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        payload = post_json(self.endpoint, body, headers, timeout, what=self.name, auth_hint=self.auth_hint)
        return self._parse(payload, tool)

    def _parse(self, payload: dict[str, Any], tool: str | None) -> Reply:
        blocks = payload.get("content")
        if not isinstance(blocks, list):
            raise LLMError(f"{self.name}: response has no content list (keys: {', '.join(sorted(payload)) or '-'})")
        if payload.get("stop_reason") == "refusal":
            raise LLMError(f"{self.name}: the model refused to answer")
        text = ""
        uses = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
        if tool is not None and uses:
            use = next((b for b in uses if b.get("name") == tool), uses[0])
            # the tool input *is* the structured output; validated like any other reply
            text = json.dumps(use.get("input"), ensure_ascii=False)
        else:
            text = "".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")
        usage: Any = payload.get("usage") if isinstance(payload.get("usage"), dict) else {}
        prompt = _int(usage.get("input_tokens"))
        if prompt is not None:  # cached prompt tokens are billed input too
            prompt += sum(_int(usage.get(k)) or 0 for k in ("cache_creation_input_tokens", "cache_read_input_tokens"))
        return Reply(text=text, prompt_tokens=prompt, completion_tokens=_int(usage.get("output_tokens")))
