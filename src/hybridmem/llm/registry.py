"""The one place that maps LLM specs (``openai:MODEL``, ``gemini:MODEL``, ``anthropic:MODEL``,
``none``) to providers, and reads the configured LLM from the environment. Providers never import
this module (they import ``base``)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ..errors import ValidationError
from .base import ChatModel

__all__ = ["LLM_ENV", "PROVIDERS", "create_chat_model", "is_none_spec", "llm_spec_from_env", "resolve_llm"]

#: the environment variable naming the configured LLM (a spec string); unset = no LLM, offline paths
LLM_ENV = "HYBRIDMEM_LLM"
#: spec values that mean "no LLM", so an environment default can be switched off per call
_NONE_SPECS = frozenset({"", "none", "off", "offline", "false", "0"})


def _openai(model: str, **kwargs: Any) -> ChatModel:
    from .openai import OpenAIChatModel

    return OpenAIChatModel(model, **kwargs)


def _gemini(model: str, **kwargs: Any) -> ChatModel:
    from .gemini import GeminiChatModel

    return GeminiChatModel(model, **kwargs)


def _anthropic(model: str, **kwargs: Any) -> ChatModel:
    from .anthropic import AnthropicChatModel

    return AnthropicChatModel(model, **kwargs)


_BUILDERS: dict[str, Callable[..., ChatModel]] = {"openai": _openai, "gemini": _gemini, "anthropic": _anthropic}
PROVIDERS = tuple(_BUILDERS)


def create_chat_model(spec: str, **kwargs: Any) -> ChatModel:
    """Build a chat model from ``provider:model``.

    ``openai:MODEL`` — any OpenAI-compatible ``/chat/completions`` (OpenAI, Ollama, vLLM, llama.cpp
    server, LM Studio); ``OPENAI_API_KEY``; endpoint from ``HYBRIDMEM_LLM_BASE_URL`` /
    ``OPENAI_BASE_URL``. ``gemini:MODEL`` — ``GEMINI_API_KEY`` / ``GOOGLE_API_KEY``.
    ``anthropic:MODEL`` — ``ANTHROPIC_API_KEY``. ``HYBRIDMEM_LLM_TIMEOUT`` (seconds per request)
    and ``HYBRIDMEM_LLM_TEMPERATURE`` (``none`` to omit it) apply to all.
    """
    if not isinstance(spec, str):
        raise ValidationError(f"an LLM spec is a string such as openai:gpt-4o-mini, got {spec!r}", field="llm")
    kind, sep, model = spec.strip().partition(":")
    build = _BUILDERS.get(kind.lower())
    if build is None or not sep or not model.strip():
        raise ValidationError(
            f"unknown LLM {spec!r}; use openai:MODEL (OpenAI, Ollama, vLLM, llama.cpp, LM Studio), "
            "gemini:MODEL or anthropic:MODEL, or none",
            field="llm",
        )
    return build(model, **{**_env_options(), **kwargs})


def _env_options() -> dict[str, Any]:
    out: dict[str, Any] = {}
    raw = os.environ.get("HYBRIDMEM_LLM_TIMEOUT", "").strip()
    if raw:
        try:
            out["timeout"] = float(raw)
        except ValueError:
            raise ValidationError(
                f"HYBRIDMEM_LLM_TIMEOUT must be a number of seconds, got {raw!r}", field="llm"
            ) from None
    raw = os.environ.get("HYBRIDMEM_LLM_TEMPERATURE", "").strip()
    if raw:
        try:
            out["temperature"] = None if raw.lower() == "none" else float(raw)
        except ValueError:
            raise ValidationError(
                f"HYBRIDMEM_LLM_TEMPERATURE must be a number or none, got {raw!r}", field="llm"
            ) from None
    return out


def llm_spec_from_env() -> str | None:
    spec = os.environ.get(LLM_ENV, "").strip()
    return None if is_none_spec(spec) else spec


def is_none_spec(spec: str) -> bool:
    return spec.strip().lower() in _NONE_SPECS


def resolve_llm(llm: str | ChatModel | None) -> ChatModel | None:
    """A ChatModel from an explicit choice, else from ``HYBRIDMEM_LLM``; None when no LLM is
    configured (``"none"`` switches an environment default off). Never a silent default."""
    if llm is None:
        spec = llm_spec_from_env()
        return create_chat_model(spec) if spec else None
    if isinstance(llm, str):
        return None if is_none_spec(llm) else create_chat_model(llm)
    if isinstance(llm, ChatModel):
        return llm
    raise ValidationError(f"llm is a spec string or a ChatModel, got {type(llm).__name__}", field="llm")
