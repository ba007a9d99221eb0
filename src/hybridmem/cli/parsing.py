"""Parsing option values: ``key=value`` metadata, JSON objects, filters."""

from __future__ import annotations

import json
from typing import Any, Optional

from ..errors import ValidationError

__all__ = ["filter_option", "json_object", "parse_meta"]


def parse_meta(items: list[str], field: str = "--meta") -> dict[str, Any]:
    """``key=value`` items as a dict (values parsed as JSON when they are: numbers, booleans, null);
    ``field`` is the option they came from, named in the error."""
    meta: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValidationError(f"expected key=value, got {item!r}", field=field)
        try:
            meta[key.strip()] = json.loads(value)  # numbers, booleans, null
        except json.JSONDecodeError:
            meta[key.strip()] = value
    return meta


def json_object(raw: str, field: str) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ValidationError(f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}", field=field) from None
    except RecursionError:
        raise ValidationError("JSON nested too deeply", field=field) from None
    if not isinstance(data, dict):
        raise ValidationError(f"expected a JSON object, got {type(data).__name__}", field=field)
    return data


def filter_option(items: list[str], filter_json: Optional[str]) -> dict[str, Any]:
    """``--filter`` values are JSON objects or key=value pairs; ``--filter-json`` one JSON object."""
    flt: dict[str, Any] = {}
    if filter_json:
        flt.update(json_object(filter_json, "--filter-json"))
    for item in items:
        flt.update(json_object(item, "--filter") if item.lstrip().startswith("{") else parse_meta([item], "--filter"))
    return flt
