"""Chat models: one protocol, one module per provider, chosen by a spec string; every LLM step of
hybridmem has an offline path, used when no model is configured."""

from .base import (
    LLM_ENV,
    BaseChatModel,
    ChatModel,
    Completion,
    Message,
    create_chat_model,
    llm_spec_from_env,
    resolve_llm,
)
from .retry import RetryPolicy, Retryable, call_with_retry

__all__ = [
    "ChatModel",
    "BaseChatModel",
    "Completion",
    "Message",
    "RetryPolicy",
    "Retryable",
    "call_with_retry",
    "create_chat_model",
    "resolve_llm",
    "llm_spec_from_env",
    "LLM_ENV",
]
