"""``openai:MODEL``: any OpenAI-compatible ``POST {base_url}/chat/completions`` (OpenAI, Ollama,
vLLM, llama.cpp server, LM Studio); structured output via ``response_format: json_schema``."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel

from ..errors import LLMError
from ._http import HTTPStatusError, post_json
from .base import (
    BaseChatModel,
    Message,
    Reply,
    _int,
    json_schema,
    schema_name,
    strict_schema,
)

__all__ = ["OpenAIChatModel"]

log = logging.getLogger(__name__)


class OpenAIChatModel(BaseChatModel):
    provider = "openai"
    default_base_url = "https://api.openai.com/v1"
    key_envs = ("OPENAI_API_KEY",)
    base_url_envs = ("OPENAI_BASE_URL",)

    def __init__(self, model: str, **kwargs: Any) -> None:
        super().__init__(model, **kwargs)
        self.endpoint = f"{self.base_url}/chat/completions"
        # some servers (older llama.cpp, LM Studio builds) reject json_schema: learnt on first 400
        self._json_schema_ok = True

    def _request(self, messages: list[Message], schema: type[BaseModel] | None, timeout: float) -> Reply:
        body: dict[str, Any] = {"model": self.model, "messages": [dict(m) for m in messages]}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        if schema is not None and self._json_schema_ok:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": schema_name(schema),
                    "schema": strict_schema(json_schema(schema)),
                    "strict": True,
                },
            }
        try:
            payload = post_json(self.endpoint, body, headers, timeout, what=self.name, auth_hint=self.auth_hint)
        except HTTPStatusError as e:
            if e.status != 400 or "response_format" not in body or "response_format" not in str(e):
                raise
            # the prompt asks for JSON too, and the reply is validated either way
            log.warning("%s: server rejects response_format json_schema (%s); asking by prompt only", self.name, e)
            self._json_schema_ok = False
            del body["response_format"]
            payload = post_json(self.endpoint, body, headers, timeout, what=self.name, auth_hint=self.auth_hint)
        return self._parse(payload)

    def _parse(self, payload: dict[str, Any]) -> Reply:
        choices = payload.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise LLMError(f"{self.name}: response has no choices (keys: {', '.join(sorted(payload)) or '-'})")
        msg = choices[0].get("message") or {}
        content = msg.get("content")
        if isinstance(content, list):  # some servers send content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if not content and msg.get("refusal"):
            raise LLMError(f"{self.name}: the model refused: {str(msg['refusal'])[:300]}")
        usage: Any = payload.get("usage") if isinstance(payload.get("usage"), dict) else {}
        return Reply(
            text=content if isinstance(content, str) else "",
            prompt_tokens=_int(usage.get("prompt_tokens")),
            completion_tokens=_int(usage.get("completion_tokens")),
        )
