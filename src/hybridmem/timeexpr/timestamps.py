"""Stored timestamps (datetimes, epoch seconds, ISO 8601, the LoCoMo form) in aware UTC form."""

from __future__ import annotations

import math
import numbers
import re
from datetime import UTC, date, datetime, timedelta

from .vocab import _MONTH_ABBR_EN, _MONTHS_EN

_HINT = "(ISO 8601 like 2023-05-08T13:56:00Z, or epoch seconds)"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SHOWN_CHARS = 80


def parse_timestamp(value: object, *, field: str = "timestamp") -> datetime:
    """An aware UTC datetime from a stored timestamp, or :class:`ValueError` naming ``field``.

    Accepted: a ``datetime`` (naive = UTC, aware = converted), a ``date`` (its midnight UTC), epoch
    seconds as an int or float (not a bool, NaN or infinity; years 1-9999), an ISO 8601 string
    ("2023-05-08", "2023-05-08T13:56", "2023-05-08 13:56:00+02:00", "…Z"; naive = UTC) and the LoCoMo
    form "1:56 pm on 8 May, 2023" (UTC). A numeric string is not read as epoch seconds: "20230508"
    is an ISO 8601 date, and guessing between the two would be a silent error.
    """
    if isinstance(value, datetime):
        return _as_utc(value)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return _from_epoch(value, field)
    if isinstance(value, str):
        parsed = _from_text(value.strip())
        if parsed is not None:
            return parsed
    raise ValueError(f"{field}: {_shown(value)} is not a time {_HINT}")


def _as_utc(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


def _from_epoch(value: numbers.Real, field: str) -> datetime:
    outside = f"{field}: {_shown(value)} epoch seconds is outside the years 1-9999"
    try:
        seconds: int | float = int(value) if isinstance(value, numbers.Integral) else float(value)
    except OverflowError:  # a Fraction too big for a float
        raise ValueError(outside) from None
    if isinstance(seconds, float) and not math.isfinite(seconds):
        raise ValueError(f"{field}: {_shown(value)} is not a finite number of epoch seconds")
    try:
        return _EPOCH + timedelta(seconds=seconds)
    except OverflowError:  # beyond timedelta's or datetime's range
        raise ValueError(outside) from None


_LOCOMO = re.compile(
    r"(?P<hour>\d{1,2}):(?P<minute>\d{2})\s*(?P<half>[ap])\.?\s*m\.?\s+on\s+(?P<day>\d{1,2})\s+"
    r"(?P<month>[a-z]+)\.?,?\s+(?P<year>\d{4})",
    re.IGNORECASE,
)


def _from_text(text: str) -> datetime | None:
    """ISO 8601 (what :meth:`datetime.fromisoformat` reads) or the LoCoMo form; None if neither."""
    try:
        return _as_utc(datetime.fromisoformat(text))
    except ValueError:
        pass
    m = _LOCOMO.fullmatch(text)
    month = _MONTHS_EN.get(m["month"].lower()) or _MONTH_ABBR_EN.get(m["month"].lower()) if m else None
    if m is None or month is None or not 1 <= int(m["hour"]) <= 12:
        return None
    hour = int(m["hour"]) % 12 + (12 if m["half"].lower() == "p" else 0)
    try:
        return datetime(int(m["year"]), month, int(m["day"]), hour, int(m["minute"]), tzinfo=UTC)
    except ValueError:
        return None
