"""Calendar arithmetic: a period is (start, end, granularity), aware in the asker's zone."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo

_Span = tuple[datetime, datetime, str]


@dataclass(frozen=True)
class _Ctx:
    now: datetime  # aware, in the asker's zone
    today: date
    tz: tzinfo
    guessing: bool  # no language given: words two languages share need their language's context


def _context(now: datetime, *, guessing: bool) -> _Ctx:
    if not isinstance(now, datetime):
        raise TypeError(f"now: expected a datetime, got {type(now).__name__}")
    tz: tzinfo = now.tzinfo if now.tzinfo is not None and now.utcoffset() is not None else UTC
    now = now.replace(tzinfo=tz)
    return _Ctx(now, now.date(), tz, guessing)


def _at(ctx: _Ctx, day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=ctx.tz)


def _days(ctx: _Ctx, first: date, count: int, granularity: str) -> _Span:
    return _at(ctx, first), _at(ctx, first + timedelta(days=count)), granularity


def _month_span(ctx: _Ctx, year: int, month: int) -> _Span:
    end = date(year + 1, 1, 1) if month == 12 else date(year, month + 1, 1)
    return _at(ctx, date(year, month, 1)), _at(ctx, end), "month"


def _year_span(ctx: _Ctx, year: int) -> _Span:
    return _at(ctx, date(year, 1, 1)), _at(ctx, date(year + 1, 1, 1)), "year"


def _add_months(year: int, month: int, n: int) -> tuple[int, int]:
    index = year * 12 + month - 1 + n
    return index // 12, index % 12 + 1


def _monday(day: date) -> date:
    return day - timedelta(days=day.weekday())


def _shift(ctx: _Ctx, unit: str, n: int) -> _Span:
    """The ``unit`` ("day", "week", "weekend", "month", "year") ``n`` steps from the one holding now."""
    today = ctx.today
    if unit == "day":
        return _days(ctx, today + timedelta(days=n), 1, "day")
    if unit == "week":
        return _days(ctx, _monday(today) + timedelta(weeks=n), 7, "week")
    if unit == "weekend":
        return _days(ctx, _monday(today) + timedelta(weeks=n, days=5), 2, "day")
    if unit == "month":
        return _month_span(ctx, *_add_months(today.year, today.month, n))
    return _year_span(ctx, today.year + n)


def _year_of_month(ctx: _Ctx, month: int, relation: str | None) -> int:
    """The year of a month named without one: recent (not after now's month), last, this or next."""
    year, current = ctx.today.year, ctx.today.month
    if relation == "last":
        return year if month < current else year - 1
    if relation == "next":
        return year if month > current else year + 1
    if relation == "this":
        return year
    return year if month <= current else year - 1


def _recent_date(ctx: _Ctx, month: int, day: int) -> date:
    """The most recent ``day`` of ``month`` not after today (29 February: the last leap year's)."""
    year = ctx.today.year if (month, day) <= (ctx.today.month, ctx.today.day) else ctx.today.year - 1
    for back in range(9):
        try:
            return date(year - back, month, day)
        except ValueError:
            continue
    raise ValueError(f"no day {day} in month {month}")


def _weekday_date(ctx: _Ctx, weekday: int, relation: str) -> date:
    """The most recent ``weekday`` strictly before today, or with "next" the first strictly after."""
    if relation == "next":
        return ctx.today + timedelta(days=(weekday - ctx.today.weekday()) % 7 or 7)
    return ctx.today - timedelta(days=(ctx.today.weekday() - weekday) % 7 or 7)


def _season_span(ctx: _Ctx, first_month: int, year: int) -> _Span:
    end_year, end_month = _add_months(year, first_month, 3)
    return _at(ctx, date(year, first_month, 1)), _at(ctx, date(end_year, end_month, 1)), "month"
