"""Listing the memories themselves, page by page (``Memory.list``, ``GET /v1/memories``).

Keyset pagination: a page is the documents after the previous page's last (sort key, id), in one
SQL statement, so paging stays exact while others write: a memory present for the whole walk is
returned once, never skipped or repeated (a memory written or deleted meanwhile may or may not
be). The cursor is opaque: base64url JSON of the position, the namespace and a fingerprint of the
filter and order it belongs to, with a checksum. A cursor of another namespace, of another filter
or order, or altered, is refused (422 naming ``cursor``); the namespace a page reads is always the
caller's, never the cursor's, so no cursor reaches another tenant's memories.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import Any

from ..errors import ValidationError
from ..models import ListRequest, MemoryPage
from .scope import combine, scope_filter
from .search import Searcher

__all__ = ["list_page", "list_request"]

_VERSION = 1


def list_request(data: dict[str, Any]) -> ListRequest:
    """A :class:`ListRequest` from its fields; pydantic's first error becomes a ValidationError
    naming the field (``limit`` over 1,000, an unknown ``order``, a field that does not exist)."""
    from pydantic import ValidationError as PydanticError  # noqa: PLC0415

    try:
        return ListRequest(**data)
    except PydanticError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "request"
        raise ValidationError(err["msg"].removeprefix("Value error, "), field=field) from None


def list_page(searcher: Searcher, req: ListRequest, namespace: str) -> MemoryPage:
    """One page of ``req``'s memories in ``namespace`` (validated filter, scopes and times: the
    pre-filter a query's legs share), and the cursor of the next one."""
    flt = searcher.validate_filter(namespace, req.metadata_filter)
    flt = combine(flt, scope_filter(req, searcher.store, namespace))
    shape = _shape(req)
    after = _decode(req.cursor, namespace, shape) if req.cursor else None
    rows = searcher.store.list_documents(namespace, flt, req.order, req.descending, after, req.limit + 1)
    more = len(rows) > req.limit
    rows = rows[: req.limit]
    nxt = _encode(namespace, shape, (rows[-1][0], rows[-1][1]["doc_id"])) if more and rows else None
    return MemoryPage(namespace=namespace, memories=[r for _, r in rows], next_cursor=nxt)


def _shape(req: ListRequest) -> str:
    """What a cursor belongs to besides its namespace: the filter, scopes, times and order."""
    fields = req.model_dump(exclude={"cursor", "limit", "namespace", "now", "context_window"}, mode="json")
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


def _sum(body: str) -> str:
    return hashlib.sha256(f"hybridmem-cursor:{body}".encode()).hexdigest()[:12]


def _encode(namespace: str, shape: str, after: tuple[Any, str]) -> str:
    body = json.dumps({"v": _VERSION, "ns": namespace, "shape": shape, "after": list(after)}, separators=(",", ":"))
    return base64.urlsafe_b64encode(f"{body}|{_sum(body)}".encode()).decode().rstrip("=")


def _decode(cursor: str, namespace: str, shape: str) -> tuple[Any, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        body, check = raw.rsplit("|", 1)
        data = json.loads(body)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise ValidationError(
            "not a cursor this server gave (next_cursor of a previous page)", field="cursor"
        ) from None
    if check != _sum(body) or not isinstance(data, dict) or data.get("v") != _VERSION:
        raise ValidationError(
            "the cursor was altered or is of another version: start again without one", field="cursor"
        )
    if data.get("ns") != namespace:
        raise ValidationError("the cursor is of another namespace", field="cursor")
    if data.get("shape") != shape:
        raise ValidationError(
            "the cursor is of another filter, scope, time or order: page with the request that gave it", field="cursor"
        )
    after = data.get("after")
    if not (isinstance(after, list) and len(after) == 2 and isinstance(after[1], str)):
        raise ValidationError("the cursor was altered: start again without one", field="cursor")
    return after[0], after[1]
