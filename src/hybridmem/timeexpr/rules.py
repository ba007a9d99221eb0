"""Rules: a pattern and what its match means, and the builders the rules of each language
(:mod:`.languages`) are made with."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date

from .spans import (
    _Ctx,
    _days,
    _monday,
    _month_span,
    _recent_date,
    _shift,
    _Span,
    _weekday_date,
    _year_of_month,
    _year_span,
)
from .vocab import _UNITS, _YEAR_OFFSETS
from .words import _WEEKDAYS, _fold, _month_number, _number, _previous_word, _relation

# ---------------------------------------------------------------------------------------------------
# regex pieces

_S = r"(?<![\w.\-])"  # a word starts here (an apostrophe may precede: "d'aujourd'hui")
_E = r"(?![\w\-]|\.\w)"  # and ends here ("today.py", "today-ish" and "2023.1" are not words)
_YEAR = r"(?P<year>1\d{3}|2\d{3})"
_DAY = r"(?P<day>3[01]|[12]\d|0?[1-9])"
_ORD_EN = r"(?P<ord>st|nd|rd|th)?"
_ZH_NUM = r"[一二三四五六七八九十两]"
_ZH_MONTH = r"(?P<month>1[0-2]|0?[1-9]|十[一二]?|[一二三四五六七八九])"
_ZH_DAY = r"(?P<day>3[01]|[12]\d|0?[1-9]|三十一?|二?十[一二三四五六七八九]?|[一二三四五六七八九])"
_ZH_YEAR = r"(?<!\d)(?P<year>\d{4}|[〇零一二三四五六七八九]{4})"


_Resolver = Callable[[re.Match[str], _Ctx], "_Span | None"]
_Check = Callable[[re.Match[str], _Ctx], bool]


@dataclass(frozen=True)
class _Rule:
    lang: str  # "*": language-neutral (ISO dates)
    pattern: re.Pattern[str]
    resolve: _Resolver


def _rx(body: str, *, words: bool = True) -> re.Pattern[str]:
    return re.compile(f"{_S}(?:{body}){_E}" if words else body, re.IGNORECASE)


def _phrases(lang: str, table: Sequence[tuple[str, str, int]], *, words: bool = True) -> _Rule:
    """Fixed phrases, each (regex, unit, steps from now): "yesterday" = ("yesterday", "day", -1)."""
    ordered = sorted(table, key=lambda row: -len(row[0]))  # without word guards the longest must come first
    pattern = _rx("|".join(f"(?P<p{i}>{regex})" for i, (regex, _, _) in enumerate(ordered)), words=words)

    def resolve(m: re.Match[str], ctx: _Ctx) -> _Span | None:
        i = next(i for i in range(len(ordered)) if m.group(f"p{i}") is not None)
        return _shift(ctx, ordered[i][1], ordered[i][2])

    return _Rule(lang, pattern, resolve)


def _guarded_day(lang: str, body: str, steps: int, not_after: frozenset[str], check: _Check | None = None) -> _Rule:
    """A day word that is something else after some words: "la mañana" (the morning), "am Morgen"."""

    def resolve(m: re.Match[str], ctx: _Ctx) -> _Span | None:
        if _previous_word(m) in not_after or (check is not None and not check(m, ctx)):
            return None
        return _shift(ctx, "day", steps)

    return _Rule(lang, _rx(body), resolve)


def _ago(lang: str, body: str, *, words: bool = True) -> _Rule:
    """'N units ago': the unit holding now - N units (groups ``n`` and ``unit``)."""

    def resolve(m: re.Match[str], ctx: _Ctx) -> _Span | None:
        unit = _UNITS[_fold(m["unit"]).replace("个", "").replace(" ", "")]
        return _shift(ctx, unit, -_number(m["n"]))

    return _Rule(lang, _rx(body, words=words), resolve)


def _dates(
    lang: str,
    body: str,
    *,
    relation: str | None = None,
    week: bool = False,
    check: _Check | None = None,
    words: bool = True,
) -> _Rule:
    """A month (group ``month``), with an optional ``day``, ``year``, relation ``rel`` or year offset
    ``yrel``; ``week``: the ISO week holding that day."""

    def resolve(m: re.Match[str], ctx: _Ctx) -> _Span | None:
        if check is not None and not check(m, ctx):
            return None
        groups = m.groupdict()
        month = _month_number(m["month"])
        if groups.get("year"):
            year = _number(m["year"])
        elif groups.get("yrel"):
            year = ctx.today.year + _YEAR_OFFSETS[_relation(m["yrel"]) or m["yrel"]]
        else:
            year = _year_of_month(ctx, month, relation or _relation(groups.get("rel")))
        if not groups.get("day"):
            return _month_span(ctx, year, month)
        exact = bool(groups.get("year") or groups.get("yrel"))
        day = date(year, month, _number(m["day"])) if exact else _recent_date(ctx, month, _number(m["day"]))
        return _days(ctx, _monday(day), 7, "week") if week else _days(ctx, day, 1, "day")

    return _Rule(lang, _rx(body, words=words), resolve)


def _weekdays(lang: str, body: str, *, check: _Check | None = None) -> _Rule:
    """A weekday (group ``wd``): the most recent strictly past one, or the next with a "next" ``rel``."""

    def resolve(m: re.Match[str], ctx: _Ctx) -> _Span | None:
        if check is not None and not check(m, ctx):
            return None
        relation = "next" if _relation(m.groupdict().get("rel")) == "next" else "last"
        return _days(ctx, _weekday_date(ctx, _WEEKDAYS[_fold(m["wd"])], relation), 1, "day")

    return _Rule(lang, _rx(body), resolve)


def _years(lang: str, body: str, *, words: bool = True) -> _Rule:
    def resolve(m: re.Match[str], ctx: _Ctx) -> _Span | None:
        return _year_span(ctx, _number(m["year"]))

    return _Rule(lang, _rx(body, words=words), resolve)


def _ranges(lang: str, opening: str, joining: str, month: str, *, zh: bool = False) -> list[_Rule]:
    """ "between May and July", "from 2020 to 2022": one period from the first to the end of the second.
    Both ends must be months (or years): "between May and Caroline" is no range, and no month."""
    year = r"(?:1\d{3}|2\d{3})"
    # Chinese may leave the opening out (5月到7月); its \s* stays inside the optional group, or every
    # position of a long run of spaces would scan the whole run again
    start = r"(?<![\d〇零一二三四五六七八九十两个年])(?:" + opening + r"\s*)?" if zh else opening + r"\s*"
    month_unit, year_unit = ("月", "年") if zh else ("", "")
    lead, trail = (rf"(?:(?P<year>{year})年\s*)?", "") if zh else ("", rf"(?:,?\s*(?P<year>{year}))?")
    months = rf"{start}{lead}(?P<month>{month}){month_unit}\s*{joining}\s*(?P<month2>{month}){month_unit}{trail}"
    years = rf"{start}(?P<y1>{year}){year_unit}\s*{joining}\s*(?P<y2>{year}){year_unit}"
    return [_Rule(lang, _rx(months, words=not zh), _month_range), _Rule(lang, _rx(years, words=not zh), _year_range)]


def _month_range(m: re.Match[str], ctx: _Ctx) -> _Span | None:
    """Without a year the second month is the most recent one; the first is the latest not after it."""
    first, last = _month_number(m["month"]), _month_number(m["month2"])
    year = _number(m["year"]) if m["year"] else _year_of_month(ctx, last, None)
    start = _month_span(ctx, year if first <= last else year - 1, first)
    return start[0], _month_span(ctx, year, last)[1], "month"


def _year_range(m: re.Match[str], ctx: _Ctx) -> _Span | None:
    first, last = int(m["y1"]), int(m["y2"])
    return (_year_span(ctx, first)[0], _year_span(ctx, last)[1], "year") if first <= last else None
