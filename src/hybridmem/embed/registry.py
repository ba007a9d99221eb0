"""The one place that maps embedder specs ↔ recorded names ↔ providers.

A spec is ``KIND`` or ``KIND:ARG``: ``e5`` (default, bundled multilingual-e5-small 4-bit),
``use`` (bundled multilingual USE v3), ``st:NAME_OR_PATH`` (sentence-transformers extra),
``openai:MODEL`` (any OpenAI-compatible ``/v1/embeddings``), ``hash`` / ``hash:DIM``
(deterministic test embedder). The name is what a store records; two embedders of one name must
produce interchangeable vectors. Providers never import this module (they import ``base``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .. import config
from ..errors import ValidationError
from .base import Embedder
from .e5 import E5_NAME, e5_name
from .hashing import DEFAULT_DIM, hash_name
from .use import USE_NAME

__all__ = ["create_embedder", "embedder_name", "spec_for_name", "wants_separate_worker_instance"]


@dataclass(frozen=True)
class _Kind:
    #: ARG → the embedder (imports the provider, may load a model)
    build: Callable[[str], Embedder]
    #: ARG → the name it records, without loading anything
    name: Callable[[str], str]
    #: a model bundled with hybridmem, run in this process: batch embedding gets its own instance
    bundled: bool = False
    #: set when ARG is required: the error given without it
    needs_arg: str | None = None


def _e5(arg: str) -> Embedder:
    from .e5 import E5Embedder

    return E5Embedder(variant=arg or "original")


def _use(arg: str) -> Embedder:
    from .use import USEEmbedder

    return USEEmbedder()


def _st(arg: str) -> Embedder:
    from .sentence_transformers import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(arg)


def _openai(arg: str) -> Embedder:
    from .openai import OpenAIEmbedder

    return OpenAIEmbedder(arg)


def _hash_dim(arg: str) -> int:
    return int(arg) if arg else DEFAULT_DIM


def _hash(arg: str) -> Embedder:
    from .hashing import HashEmbedder

    return HashEmbedder(dim=_hash_dim(arg))


_KINDS: dict[str, _Kind] = {
    "e5": _Kind(_e5, lambda arg: e5_name(arg or "original"), bundled=True),
    "use": _Kind(_use, lambda arg: USE_NAME, bundled=True),
    "st": _Kind(_st, lambda arg: f"st:{arg}", needs_arg="st: needs a model name or path, e.g. st:all-MiniLM-L6-v2"),
    "openai": _Kind(
        _openai, lambda arg: f"openai:{arg}", needs_arg="openai: needs a model, e.g. openai:nomic-embed-text"
    ),
    "hash": _Kind(_hash, lambda arg: hash_name(_hash_dim(arg))),
}
#: recorded name → the short spec that rebuilds it (any other name is its own spec)
_NAME_TO_SPEC = {E5_NAME: "e5", USE_NAME: "use"}


def _parse(spec: str) -> tuple[str, str]:
    kind, _, arg = spec.strip().partition(":")
    return kind.lower(), arg


def _kind(spec: str) -> tuple[_Kind, str]:
    """The provider entry and ARG of a spec string; ValidationError for an unusable spec."""
    kind, arg = _parse(spec)
    entry = _KINDS.get(kind)
    if entry is None:
        raise ValidationError(
            f"unknown embedder {spec!r}; use e5, use, st:NAME_OR_PATH, openai:MODEL or hash[:DIM]",
            field="embedder",
        )
    if entry.needs_arg and not arg:
        raise ValidationError(entry.needs_arg, field="embedder")
    return entry, arg


def create_embedder(spec: str | Embedder | None) -> Embedder:
    """Build an embedder from a spec string (None: the default, ``e5``); an Embedder is returned
    as is. ``openai:MODEL`` reads ``HYBRIDMEM_OPENAI_BASE_URL`` / ``OPENAI_BASE_URL`` and
    ``OPENAI_API_KEY``."""
    if spec is None:
        spec = config.DEFAULT_EMBEDDER
    if not isinstance(spec, str):
        if isinstance(spec, Embedder):
            return spec
        raise ValidationError(f"not an embedder: {spec!r}", field="embedder")
    entry, arg = _kind(spec)
    return entry.build(arg)


def embedder_name(spec: str | Embedder | None) -> str:
    """The name an embedder spec will record in a store, without loading the model."""
    if spec is None:
        spec = config.DEFAULT_EMBEDDER
    if not isinstance(spec, str):
        return spec.name
    entry, arg = _kind(spec)  # raises a clear error for unknown specs
    return entry.name(arg)


def spec_for_name(name: str | None) -> str | None:
    """The spec that rebuilds the embedder a store recorded as ``name`` (None for no name)."""
    return _NAME_TO_SPEC.get(name, name) if name else None


def wants_separate_worker_instance(spec: str | Embedder | None) -> bool:
    """Whether batch (document) embedding should get a second model instance, so that queries never
    wait behind a batch: true for the bundled in-process models (``e5``, ``use``)."""
    if spec is None:
        spec = config.DEFAULT_EMBEDDER
    if not isinstance(spec, str):
        return False
    entry = _KINDS.get(_parse(spec)[0])
    return entry is not None and entry.bundled
