"""``gemini:MODEL``: the Gemini REST API (``POST {base}/v1beta/models/{model}:generateContent``,
the wire format google-genai speaks), standard library only; structured output via
``generationConfig.responseMimeType`` + ``responseSchema``."""

from __future__ import annotations

import urllib.parse
from typing import Any

from pydantic import BaseModel

from ..errors import LLMError
from ._http import post_json
from .base import BaseChatModel, Message, Reply, _int, json_schema

__all__ = ["GeminiChatModel", "gemini_schema"]

# the OpenAPI subset Gemini's Schema object accepts; anything else is a 400 "Unknown name"
_KEEP = {
    "type",
    "format",
    "description",
    "nullable",
    "enum",
    "items",
    "properties",
    "required",
    "minItems",
    "maxItems",
    "anyOf",
    "propertyOrdering",
    "minimum",
    "maximum",
}


def gemini_schema(schema: Any) -> Any:
    """JSON schema → Gemini Schema: upper-case types, ``anyOf [X, null]`` → ``nullable``, property
    order kept (``propertyOrdering``), unsupported keywords dropped."""
    if isinstance(schema, list):
        return [gemini_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    any_of = schema.get("anyOf")
    if isinstance(any_of, list):
        rest = [s for s in any_of if not (isinstance(s, dict) and s.get("type") == "null")]
        if len(rest) == 1 and len(rest) < len(any_of):
            merged = {**{k: v for k, v in schema.items() if k != "anyOf"}, **rest[0]}
            return {**gemini_schema(merged), "nullable": True}
    out: dict[str, Any] = {}
    for k, v in schema.items():
        if k not in _KEEP:
            continue
        if k == "type":
            out[k] = v.upper() if isinstance(v, str) else v
        elif k == "properties":
            out[k] = {name: gemini_schema(sub) for name, sub in v.items()}
            out["propertyOrdering"] = list(v)
        else:
            out[k] = gemini_schema(v)
    return out


class GeminiChatModel(BaseChatModel):
    provider = "gemini"
    default_base_url = "https://generativelanguage.googleapis.com"
    key_envs = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    base_url_envs = ("GOOGLE_GEMINI_BASE_URL",)

    def __init__(self, model: str, **kwargs: Any) -> None:
        super().__init__(model, **kwargs)
        name = self.model.removeprefix("models/")
        self.endpoint = f"{self.base_url}/v1beta/models/{urllib.parse.quote(name, safe='-._')}:generateContent"

    def _request(self, messages: list[Message], schema: type[BaseModel] | None, timeout: float) -> Reply:
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        contents = [
            {"role": "model" if m["role"] == "assistant" else "user", "parts": [{"text": m["content"]}]}
            for m in messages
            if m["role"] != "system"
        ]
        body: dict[str, Any] = {"contents": contents}
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        config: dict[str, Any] = {}
        if self.temperature is not None:
            config["temperature"] = self.temperature
        if self.max_tokens is not None:
            config["maxOutputTokens"] = self.max_tokens
        if schema is not None:
            config["responseMimeType"] = "application/json"
            config["responseSchema"] = gemini_schema(json_schema(schema))
        if config:
            body["generationConfig"] = config
        headers = {"x-goog-api-key": self._api_key} if self._api_key else {}
        return self._parse(post_json(self.endpoint, body, headers, timeout, what=self.name, auth_hint=self.auth_hint))

    def _parse(self, payload: dict[str, Any]) -> Reply:
        cands = payload.get("candidates")
        if not isinstance(cands, list) or not cands:
            block = (payload.get("promptFeedback") or {}).get("blockReason")
            raise LLMError(
                f"{self.name}: no candidate in the response" + (f" (prompt blocked: {block})" if block else "")
            )
        cand = cands[0] if isinstance(cands[0], dict) else {}
        parts = (cand.get("content") or {}).get("parts") or []
        # thinking models may return their thoughts as parts flagged "thought": not the answer
        text = "".join(p.get("text", "") for p in parts if isinstance(p, dict) and not p.get("thought"))
        finish = cand.get("finishReason")
        if not text and finish not in (None, "STOP", "MAX_TOKENS", "FINISH_REASON_UNSPECIFIED"):
            raise LLMError(f"{self.name}: no text in the response (finishReason {finish})")
        um: Any = payload.get("usageMetadata") if isinstance(payload.get("usageMetadata"), dict) else {}
        out_tokens = [_int(um.get(k)) for k in ("candidatesTokenCount", "thoughtsTokenCount")]
        return Reply(
            text=text,
            prompt_tokens=_int(um.get("promptTokenCount")),
            completion_tokens=sum(t for t in out_tokens if t) if any(t is not None for t in out_tokens) else None,
        )
