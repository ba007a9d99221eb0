"""The embedder registry: specs ↔ recorded names ↔ providers, known without loading a model; and
the OpenAI embedder's retry policy, expressed in the shared retry helper."""

from __future__ import annotations

import math
import random

import pytest

from hybridmem.embed import (
    create_embedder,
    embedder_name,
    spec_for_name,
    wants_separate_worker_instance,
)
from hybridmem.embed.hashing import HashEmbedder
from hybridmem.embed.openai import MAX_RETRY_DELAY, OpenAIEmbedder
from hybridmem.errors import ValidationError


@pytest.mark.parametrize(
    ("spec", "name"),
    [
        (None, "e5:multilingual-e5-small-q4"),
        ("e5", "e5:multilingual-e5-small-q4"),
        ("E5:original", "e5:multilingual-e5-small-q4"),
        ("e5:int8", "e5:multilingual-e5-small-q4-int8"),
        ("use", "use:multilingual-v3"),
        ("hash", "hash:256"),
        ("hash:64", "hash:64"),
        ("st:all-MiniLM-L6-v2", "st:all-MiniLM-L6-v2"),
        ("openai:nomic-embed-text", "openai:nomic-embed-text"),
    ],
)
def test_names_are_known_without_loading_a_model(spec: str | None, name: str) -> None:
    assert embedder_name(spec) == name


def test_name_of_an_instance_and_of_a_built_embedder() -> None:
    emb = create_embedder("hash:32")
    assert isinstance(emb, HashEmbedder) and emb.name == embedder_name("hash:32") == "hash:32"
    assert embedder_name(emb) == "hash:32" and create_embedder(emb) is emb


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("st", "st: needs a model name or path"),
        ("openai:", "openai: needs a model"),
        ("bogus:x", "unknown embedder 'bogus:x'; use e5, use, st:NAME_OR_PATH, openai:MODEL or hash"),
    ],
)
def test_bad_specs(spec: str, match: str) -> None:
    for fn in (create_embedder, embedder_name):
        with pytest.raises(ValidationError, match=f"embedder: {match}"):
            fn(spec)
    assert not wants_separate_worker_instance(spec)


def test_not_an_embedder() -> None:
    with pytest.raises(ValidationError, match="not an embedder"):
        create_embedder(42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "spec"),
    [
        ("e5:multilingual-e5-small-q4", "e5"),
        ("use:multilingual-v3", "use"),
        ("hash:64", "hash:64"),
        ("openai:m", "openai:m"),
        (None, None),
        ("", None),
    ],
)
def test_spec_for_name(name: str | None, spec: str | None) -> None:
    assert spec_for_name(name) == spec
    if spec is not None:
        assert embedder_name(spec) == name  # the spec rebuilds the recorded embedder


@pytest.mark.parametrize(
    ("spec", "separate"),
    [
        ("e5", True),
        ("E5:int8", True),
        ("use", True),
        (None, True),
        ("hash", False),
        ("st:x", False),
        ("openai:m", False),
    ],
)
def test_bundled_models_get_a_worker_instance(spec: str | None, separate: bool) -> None:
    assert wants_separate_worker_instance(spec) is separate
    assert not wants_separate_worker_instance(create_embedder("hash:8"))


def test_openai_embedder_retry_policy() -> None:
    emb = OpenAIEmbedder("m", base_url="http://127.0.0.1:9/v1", dim=4, max_retries=2, backoff=0.5)
    p = emb.retry_policy
    assert p.max_attempts == 3 and p.total_timeout == math.inf
    rng = random.Random(1)
    for retry in (1, 2, 3):  # the whole doubling step, plus up to ``backoff`` of jitter
        step = 0.5 * 2 ** (retry - 1)
        assert all(step <= p.delay(retry, None, rng) <= step + 0.5 for _ in range(50))
    assert p.delay(12, None, rng) == MAX_RETRY_DELAY  # capped
    assert p.delay(1, 3.0) == 3.0 and p.delay(1, 3600.0) == MAX_RETRY_DELAY  # Retry-After wins, capped
