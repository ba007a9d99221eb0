"""Chat models: one protocol, one module per provider, chosen by a spec string; every LLM step of
hybridmem has an offline path, used when no model is configured."""

from ..retry import Retryable, RetryPolicy, call_with_retry
from .base import BaseChatModel, ChatModel, Completion, Message
from .registry import LLM_ENV, create_chat_model, llm_spec_from_env, resolve_llm

__all__ = [
    "LLM_ENV",
    "BaseChatModel",
    "ChatModel",
    "Completion",
    "Message",
    "RetryPolicy",
    "Retryable",
    "call_with_retry",
    "create_chat_model",
    "llm_spec_from_env",
    "resolve_llm",
]
