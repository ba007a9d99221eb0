"""What LLM calls cost: a small built-in price table (USD per 1M tokens, prompt and completion, a
few well-known models per provider, dated) that a JSON file can extend or override.

A model is priced by its spec (``provider:model``): the exact name, else the longest table entry
its name starts with followed by ``-`` (a dated or ``-latest`` variant: ``gpt-4o-mini-2024-07-18``
is priced as ``gpt-4o-mini``). A model the table does not know costs ``"unknown"``, never an error
(a local server's model, a new release): pass ``--prices FILE.json`` to price it (``0`` for a
local model). The file maps specs to ``{"input": USD, "output": USD}`` per 1M tokens.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ValidationError

__all__ = ["PRICES", "PRICES_DATE", "Price", "call_cost", "load_prices", "price_for"]

#: when the built-in prices were read off the providers' public price pages (standard tier, no
#: batch or cache discounts); prices change: check, and override with --prices
PRICES_DATE = "2025-09"

Price = tuple[float, float]  # USD per 1M prompt tokens, per 1M completion tokens

PRICES: dict[str, Price] = {
    "openai:gpt-4o-mini": (0.15, 0.60),
    "openai:gpt-4o": (2.50, 10.00),
    "openai:gpt-4.1-nano": (0.10, 0.40),
    "openai:gpt-4.1-mini": (0.40, 1.60),
    "openai:gpt-4.1": (2.00, 8.00),
    "openai:gpt-5-nano": (0.05, 0.40),
    "openai:gpt-5-mini": (0.25, 2.00),
    "openai:gpt-5": (1.25, 10.00),
    "anthropic:claude-3-haiku": (0.25, 1.25),
    "anthropic:claude-3-5-haiku": (0.80, 4.00),
    "anthropic:claude-haiku-4-5": (1.00, 5.00),
    "anthropic:claude-sonnet-4": (3.00, 15.00),
    "anthropic:claude-sonnet-4-5": (3.00, 15.00),
    "anthropic:claude-opus-4-1": (15.00, 75.00),
    "gemini:gemini-2.0-flash-lite": (0.075, 0.30),
    "gemini:gemini-2.0-flash": (0.10, 0.40),
    "gemini:gemini-2.5-flash-lite": (0.10, 0.40),
    "gemini:gemini-2.5-flash": (0.30, 2.50),
    "gemini:gemini-2.5-pro": (1.25, 10.00),
}


def _price(value: Any, spec: str) -> Price:
    if not isinstance(value, Mapping) or set(value) - {"input", "output"} or not {"input", "output"} <= set(value):
        raise ValidationError(
            f'{spec!r} must be {{"input": USD, "output": USD}} per 1M tokens, got {value!r}', field="prices"
        )
    out = []
    for k in ("input", "output"):
        v = value[k]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ValidationError(f"{spec}.{k} must be a number >= 0 (USD per 1M tokens)", field="prices")
        out.append(float(v))
    return out[0], out[1]


def load_prices(path: Path | None) -> dict[str, Price]:
    """The built-in table, with the entries of ``path`` (a JSON object) added or replacing."""
    table = dict(PRICES)
    if path is None:
        return table
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise ValidationError(f"cannot read {path} ({e.strerror or e})", field="prices") from None
    except json.JSONDecodeError as e:
        raise ValidationError(f"{path} is not valid JSON ({e.msg}, line {e.lineno})", field="prices") from None
    if not isinstance(raw, dict):
        raise ValidationError(f"{path} must hold a JSON object of spec -> price", field="prices")
    for spec, value in raw.items():
        if ":" not in spec:
            raise ValidationError(f"{spec!r} is not a model spec (provider:model)", field="prices")
        table[spec.strip()] = _price(value, spec)
    return table


def price_for(model: str, table: Mapping[str, Price]) -> tuple[str, Price] | None:
    """The table entry pricing ``model`` (a spec) and its price, or None when it is unknown."""
    if model in table:
        return model, table[model]
    prefixes = [k for k in table if model.startswith(k + "-")]
    if not prefixes:
        return None
    best = max(prefixes, key=len)
    return best, table[best]


def call_cost(model: str, prompt_tokens: int, completion_tokens: int, table: Mapping[str, Price]) -> float | str:
    """USD for that many tokens, or ``"unknown"``."""
    hit = price_for(model, table)
    if hit is None:
        return "unknown"
    p_in, p_out = hit[1]
    return round((prompt_tokens * p_in + completion_tokens * p_out) / 1_000_000, 10)
