"""Time in questions and timestamps: the periods a question names, resolved against when it is asked.

A memory question is often anchored in time ("what did Caroline say two weeks ago?", "qu'ai-je fait
hier ?", "上周一我做了什么?"). :func:`find_time_expressions` finds those expressions and resolves each
into a half-open range ``[start, end)`` of aware UTC datetimes, so retrieval can filter or boost by a
stored timestamp; :func:`parse_timestamp` turns the timestamps a caller stores (datetimes, epoch
seconds, ISO 8601, the LoCoMo benchmark's "1:56 pm on 8 May, 2023") into the same aware UTC form.

Why rules and not a date-parsing library: we want deterministic, controllable behaviour and, above
all, no false positives. A period read where there is none filters the right memories away, while a
period missed only costs ranking precision; so every rule is anchored on its language's own words,
and ambiguous words need a context: "May" is a month after "in"/"last" or next to a day number or a
year, never as a name ("What did May say?") or a modal ("Who may attend?"); a bare 4-digit number
is a year only after "in"/"during"/"en"/"im"/… or before 年, and not before a count noun ("in
1500 ms"); "Morgen" (the German noun) and "la mañana" (the morning) are not tomorrow.

Semantics (``now`` is the moment the question is asked):

- the calendar is read in ``now``'s own time zone (naive = UTC), so "yesterday" is the asker's
  yesterday; the ranges are then converted to UTC;
- a day, an ISO week (Monday to Monday), a calendar month or year; "two weeks ago" is the week that
  holds ``now`` - 14 days, "3 days ago" that day, "two months ago" the calendar month two back;
- a weekday ("last Monday", "on Monday", "lundi dernier", "am Montag", "el lunes") is the most recent
  one strictly before today; "next Monday" the first one strictly after; 上周一 (Chinese) is the
  Monday *of last week*, as the words say;
- a month without a year ("in May", "en mai", "im Mai", 五月) is the most recent one not after
  ``now``'s month; "last May" ("mai dernier", "letzten Mai", "mayo pasado") the most recent one
  strictly before it; a date without a year ("on 8 May") the most recent one not after today;
- a weekend is Saturday and Sunday, granularity "day"; a season (English only: "last summer",
  "summer 2022") is meteorological and northern, granularity "month"; "earlier this year" runs from
  the start of the year to ``now``;
- a closed range of months or years ("between May and July", "from 2020 to 2022", "entre mai et
  juillet", "zwischen Mai und Juli", "entre mayo y julio", 从5月到7月) is one mention from the start of
  the first to the end of the second; both ends must be months (or years), so "between May and
  Caroline" is neither a range nor a month;
- an expression that opens a range ("since May", "depuis hier", "seit gestern", "desde ayer",
  从去年…以来) yields no mention, nor does anything inside it: the module returns closed periods only,
  and reading "since May" as May would drop June's memories.

Overlapping matches keep the longest (then the first), returned in text order. The module is pure
(standard library only, no hybridmem import): it sits in the ground layer.
"""

from __future__ import annotations

import math
import numbers
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from functools import cache

__all__ = ["LANGUAGES", "TIME_WORDS", "TimeMention", "asks_when", "find_time_expressions", "parse_timestamp"]

#: the languages :func:`find_time_expressions` has rules for
LANGUAGES = ("en", "fr", "de", "es", "zh")

# a question that asks *when* (its answer is a time), per language. "when", "quand" and "cuando"
# are also conjunctions ("what did she say when …"): they count at the start of the question, or
# "when" before an auxiliary, "quand" before "est-ce"; accented "cuándo" is always a question
_LEADING_WHEN = re.compile(r"^[\s\"'«“(\[¿¡]*(?:when|quand|cuando)(?![\w\-])", re.IGNORECASE)
# … unless a clause after a comma asks the question ("When she arrived, what did she say?")
_THEN_ASKS = re.compile(
    r",\s*[¿¡]?\s*(?:what|who|whom|where|why|how|which|qu['e]|qui|o[ùu]|pourquoi|comment|qu[ée]|qui[ée]n|"
    r"d[óo]nde|c[óo]mo|por\s+qu[ée]|was|wer|wo|warum|wie)(?![\w\-])",
    re.IGNORECASE,
)
_ASKS_WHEN = re.compile(
    r"(?<![\w\-])(?:"
    r"when\s+(?:did|do|does|was|were|is|are|will|would|has|have|had|can|could|should|shall|might)|"
    r"since\s+when|what\s+(?:year|month|date|day|time|week|season)|which\s+(?:year|month|date|day|week|season)|"
    r"how\s+long\s+ago|at\s+what\s+time|"
    r"quand\s+est-ce|depuis\s+quand|en\s+quel(?:le)?\s+(?:ann[ée]e|mois|saison)|quel(?:le)?\s+(?:jour|date)|"
    r"[àa]\s+quelle\s+(?:heure|date)|"
    r"wann|seit\s+wann|(?:in|an)\s+welche[mr]\s+(?:jahr|monat|tag|woche|datum)|um\s+wie\s+viel\s+uhr|"
    r"cuándo|desde\s+cu[áa]ndo|en\s+qu[ée]\s+(?:año|mes|d[íi]a|fecha|semana)|qu[ée]\s+(?:d[íi]a|fecha)"
    r")(?![\w\-])"
    r"|什么时候|何时|哪一?年|哪个月|几月|哪一?天|几号|多久以前|多久之前|多长时间以前",
    re.IGNORECASE,
)


def asks_when(text: str) -> bool:
    """True when the question asks *when* something happened or will ("When did …", "What year …",
    "Quand …", "Wann …", "¿Cuándo …?", "什么时候…"): its answer is the time a memory places it in."""
    if _ASKS_WHEN.search(text) is not None:
        return True
    return _LEADING_WHEN.search(text) is not None and _THEN_ASKS.search(text) is None


_HINT = "(ISO 8601 like 2023-05-08T13:56:00Z, or epoch seconds)"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SHOWN_CHARS = 80

# ---------------------------------------------------------------------------------------------------
# word tables (keys are folded: lower case, no accents; see _fold)

_MONTHS_EN = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6,
    "july": 7, "august": 8, "september": 9, "october": 10, "november": 11, "december": 12,
}  # fmt: skip
_MONTH_ABBR_EN = {
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "sept": 9,
    "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
_MONTHS_FR = {
    "janvier": 1, "février": 2, "mars": 3, "avril": 4, "mai": 5, "juin": 6, "juillet": 7,
    "août": 8, "septembre": 9, "octobre": 10, "novembre": 11, "décembre": 12,
}  # fmt: skip
_MONTHS_DE = {
    "januar": 1, "jänner": 1, "februar": 2, "märz": 3, "maerz": 3, "april": 4, "mai": 5, "juni": 6,
    "juli": 7, "august": 8, "september": 9, "oktober": 10, "november": 11, "dezember": 12,
}  # fmt: skip
_MONTHS_ES = {
    "enero": 1, "febrero": 2, "marzo": 3, "abril": 4, "mayo": 5, "junio": 6, "julio": 7,
    "agosto": 8, "septiembre": 9, "setiembre": 9, "octubre": 10, "noviembre": 11, "diciembre": 12,
}  # fmt: skip
#: English month words that are also names, modals or verbs: alone they need a stronger context
_AMBIGUOUS_EN = frozenset({"may", "march", "mar", "jan", "june", "april", "august", "aug"})
#: English months that are never anything else: accepted without a preposition ("October")
_SAFE_EN = ("january", "february", "july", "september", "october", "november", "december")

_WEEKDAYS_EN = {"monday": 0, "tuesday": 1, "wednesday": 2, "thursday": 3, "friday": 4, "saturday": 5, "sunday": 6}
_WEEKDAYS_FR = {"lundi": 0, "mardi": 1, "mercredi": 2, "jeudi": 3, "vendredi": 4, "samedi": 5, "dimanche": 6}
_WEEKDAYS_DE = {
    "montag": 0, "dienstag": 1, "mittwoch": 2, "donnerstag": 3, "freitag": 4, "samstag": 5,
    "sonnabend": 5, "sonntag": 6,
}  # fmt: skip
_WEEKDAYS_ES = {"lunes": 0, "martes": 1, "miércoles": 2, "jueves": 3, "viernes": 4, "sábado": 5, "domingo": 6}
_WEEKDAYS_ZH = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6, "7": 6}

_NUMBERS_EN = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}  # fmt: skip
_NUMBERS_FR = {
    "un": 1, "une": 1, "deux": 2, "trois": 3, "quatre": 4, "cinq": 5, "six": 6, "sept": 7, "huit": 8,
    "neuf": 9, "dix": 10, "onze": 11, "douze": 12,
}  # fmt: skip
_NUMBERS_DE = {
    "ein": 1, "eine": 1, "einem": 1, "einer": 1, "eins": 1, "zwei": 2, "drei": 3, "vier": 4, "fünf": 5,
    "sechs": 6, "sieben": 7, "acht": 8, "neun": 9, "zehn": 10, "elf": 11, "zwölf": 12,
}  # fmt: skip
_NUMBERS_ES = {
    "un": 1, "una": 1, "uno": 1, "dos": 2, "tres": 3, "cuatro": 4, "cinco": 5, "seis": 6, "siete": 7,
    "ocho": 8, "nueve": 9, "diez": 10, "once": 11, "doce": 12,
}  # fmt: skip
_ZH_DIGITS = {
    "〇": 0,
    "零": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}

_UNITS = {
    "day": "day", "days": "day", "week": "week", "weeks": "week", "month": "month", "months": "month",
    "year": "year", "years": "year",
    "jour": "day", "jours": "day", "semaine": "week", "semaines": "week", "mois": "month",
    "an": "year", "ans": "year", "annee": "year", "annees": "year",
    "tag": "day", "tage": "day", "tagen": "day", "woche": "week", "wochen": "week", "monat": "month",
    "monate": "month", "monaten": "month", "jahr": "year", "jahre": "year", "jahren": "year",
    "dia": "day", "dias": "day", "semana": "week", "semanas": "week", "mes": "month", "meses": "month",
    "ano": "year", "anos": "year",
    "天": "day", "周": "week", "星期": "week", "礼拜": "week", "月": "month", "年": "year",
}  # fmt: skip

#: relative words, folded: which way they point
_RELATIONS = {
    "last": "last", "previous": "last", "past": "last", "this": "this", "current": "this",
    "next": "next", "coming": "next",
    "dernier": "last", "derniere": "last", "passe": "last", "passee": "last", "prochain": "next",
    "prochaine": "next",
    "pasado": "last", "pasada": "last", "anterior": "last", "proximo": "next", "proxima": "next",
    "que viene": "next",
}  # fmt: skip
#: German declines its relative words (letzte, letzten, letztes …): they are known by their stem
_RELATION_PREFIXES: tuple[tuple[str, str], ...] = (
    ("letzt", "last"), ("vorig", "last"), ("vergangen", "last"), ("dies", "this"),
    ("nachst", "next"), ("naechst", "next"), ("kommend", "next"),
)  # fmt: skip
_YEAR_OFFSETS = {"last": -1, "this": 0, "next": 1, "前年": -2, "去年": -1, "今年": 0, "明年": 1, "后年": 2}
_SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}

#: month, weekday and season names that are mostly something else: not time words ("may", "march",
#: "fall"; French "mars" is also the planet)
_NOT_TIME_WORDS = frozenset({"may", "march", "mars", "fall"})


def _names(*tables: dict[str, int]) -> str:
    return " ".join(k for t in tables for k in t if k not in _NOT_TIME_WORDS)


#: words that place what a text says in time, per language: a memory holding one says *when*
#: (``retrieve.scope.time_word_terms`` turns them into index terms): the month, weekday and
#: (English) season names above, and the words for days, parts of days and units. Left out: words
#: that are mostly something else (French "été" = been, "hier" whose stem is English "hi";
#: Spanish "hace" = does, "noche" whose stem is German "noch"; "année" whose stem is the name Anne)
TIME_WORDS = {
    "en": "yesterday today tomorrow tonight week weekend month year ago morning evening night "
    + _names(_MONTHS_EN, _WEEKDAYS_EN, _SEASONS),
    "fr": "aujourd'hui demain semaine week-end mois matin soir hiver printemps automne "
    + _names(_MONTHS_FR, _WEEKDAYS_FR),
    "de": "gestern heute morgen woche wochenende monat jahr abend sommer winter frühling herbst "
    + _names(_MONTHS_DE, _WEEKDAYS_DE),
    "es": "ayer hoy mañana semana mes año verano invierno primavera otoño " + _names(_MONTHS_ES, _WEEKDAYS_ES),
    "zh": "昨天 今天 明天 前天 后天 上周 下周 本周 周末 星期 礼拜 去年 今年 明年 上个月 下个月 早上 晚上 "
    "一月 二月 三月 四月 五月 六月 七月 八月 九月 十月",
}

# ---------------------------------------------------------------------------------------------------
# regex pieces

_S = r"(?<![\w.\-])"  # a word starts here (an apostrophe may precede: "d'aujourd'hui")
_E = r"(?![\w\-]|\.\w)"  # and ends here ("today.py", "today-ish" and "2023.1" are not words)
_YEAR = r"(?P<year>1\d{3}|2\d{3})"
_DAY = r"(?P<day>3[01]|[12]\d|0?[1-9])"
_ORD_EN = r"(?P<ord>st|nd|rd|th)?"
#: words after a number that make it a count, not a year ("in 1500 ms", "in 2022 users")
_COUNT_NOUNS = (
    r"(?!\s+(?:users?|people|persons?|customers?|members?|employees?|items?|records?|rows?|files?|lines?"
    r"|bytes?|[kmgt]i?b|ms|seconds?|secs?|minutes?|mins?|hours?|steps?|tokens?|words?|documents?|docs?"
    r"|messages?|requests?|queries|errors?|times?|points?|dollars?|euros?|units?|releases?|versions?"
    r"|editions?|models?|pages?|characters?|chars?|km|miles?|meters?|kg|utilisateurs?|personnes?"
    r"|clients?|fichiers?|lignes?|mots?|fois|octets?|nutzer|benutzer|leute|personen|dateien|zeilen|mal"
    r"|usuarios?|personas?|archivos?|l[ií]neas?|palabras?|veces)(?![\w\-]))"
)
_ZH_NUM = r"[一二三四五六七八九十两]"
_ZH_MONTH = r"(?P<month>1[0-2]|0?[1-9]|十[一二]?|[一二三四五六七八九])"
_ZH_DAY = r"(?P<day>3[01]|[12]\d|0?[1-9]|三十一?|二?十[一二三四五六七八九]?|[一二三四五六七八九])"
_ZH_YEAR = r"(?<!\d)(?P<year>\d{4}|[〇零一二三四五六七八九]{4})"

#: words before a mention that open a range (since/before/after/until …): the mention is dropped
_OPEN_BEFORE = {
    "en": re.compile(r"(?<![\w\-])(?:since|before|after|until|till|prior\s+to)\s+$", re.IGNORECASE),
    "fr": re.compile(
        r"(?<![\w\-])(?:depuis|avant|apr[eè]s|jusqu['’]\s*(?:à|a|au|aux)|à\s+partir\s+d(?:e|u|['’]))\s*$",
        re.IGNORECASE,
    ),
    "de": re.compile(r"(?<![\w\-])(?:seit|bis(?:\s+zu[mr]?)?|nach|vor|ab)\s+$", re.IGNORECASE),
    "es": re.compile(
        r"(?<![\w\-])(?:desde|hasta|antes\s+de|despu[eé]s\s+de|a\s+partir\s+de)(?:l|\s+el|\s+la)?\s*$",
        re.IGNORECASE,
    ),
    "zh": re.compile(r"(?:自从|自|从|直到|截至|截止)\s*$"),
}
#: … and words after one (Chinese puts them after: 去年以来, 5月8日之前)
_OPEN_AFTER = {"zh": re.compile(r"^\s*(?:以来|以后|之后|以前|之前|起|开始|为止|至今|前(?![往进面台]))")}
_GERMAN_WORDS = re.compile(
    r"\b(?:ich|wir|ihr|ist|bist|hast|habe|haben|hat|wer|wann|wie|und|nicht|der|die|das|den|dem|mit|auf"
    r"|für|bin|sind|war|warst|waren|gibt|wurde|gesagt|gemacht)\b",
    re.IGNORECASE,
)
_FRENCH_WORDS = re.compile(
    r"(?:\b(?:je|tu|il|elle|nous|vous|ils|elles|on|le|la|les|un|une|des|du|de|que|quoi|quel|quelle|est"
    r"|ai|as|avons|avez|ont|été|fait|avec|pour|dans|sur|pas|ce|cette|mon|ma|mes)\b|\b[jldmtsnc]['’]|qu['’])",
    re.IGNORECASE,
)

# ---------------------------------------------------------------------------------------------------
# the public types


@dataclass(frozen=True)
class TimeMention:
    """One time expression of a question and the period it names."""

    start: datetime  # [start, end): aware UTC
    end: datetime
    text: str  # the matched words ("in May 2023", "il y a deux semaines")
    span: tuple[int, int]  # character offsets of ``text`` in the question
    granularity: str  # "day" | "week" | "month" | "year"


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


def find_time_expressions(text: str, now: datetime, lang: str | None = None) -> list[TimeMention]:
    """The time expressions of a question, each resolved against ``now`` into a UTC range.

    ``now`` is aware (naive = UTC); its own zone is the asker's calendar. ``lang`` is one of
    :data:`LANGUAGES` (a tag such as "en-US" or "zh-Hans" counts by its first part), or None to try
    every language: each language's rules are anchored on its own words, and the few words two
    languages share (French "hier" is German "here") then need their language's context.
    Overlapping matches keep the longest; the result is in text order.
    """
    if not isinstance(text, str):
        raise TypeError(f"text: expected a string, got {type(text).__name__}")
    ctx = _context(now, guessing=lang is None)
    languages = _languages(lang)
    found: list[tuple[TimeMention, bool]] = []
    for rule in _rules():
        if rule.lang != "*" and rule.lang not in languages:
            continue
        for match in rule.pattern.finditer(text):
            mention = _mention(rule, match, ctx)
            if mention is not None:
                found.append(mention)
    return _longest(found)


# ---------------------------------------------------------------------------------------------------
# parse_timestamp's parts


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


# ---------------------------------------------------------------------------------------------------
# calendar arithmetic: a period is (start, end, granularity), aware in the asker's zone


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


def _languages(lang: str | None) -> frozenset[str]:
    if lang is None:
        return frozenset(LANGUAGES)
    primary = re.split(r"[-_]", lang.strip().lower(), maxsplit=1)[0] if isinstance(lang, str) else ""
    if primary not in LANGUAGES:
        raise ValueError(f"lang: {_shown(lang)} is not supported (one of {', '.join(LANGUAGES)}, or None for all)")
    return frozenset({primary})


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


# ---------------------------------------------------------------------------------------------------
# words and numbers


def _fold(text: str) -> str:
    """Lower case without accents and with one space: the form the word tables are keyed by."""
    decomposed = unicodedata.normalize("NFKD", text.lower().replace("’", "'"))
    return " ".join("".join(c for c in decomposed if not unicodedata.combining(c)).split())


def _alt(words: Iterable[str]) -> str:
    """A regex alternation of ``words`` and their unaccented forms, longest first."""
    forms = {w for w in words} | {_fold(w) for w in words}
    return "(?:" + "|".join(re.escape(w) for w in sorted(forms, key=lambda w: (-len(w), w))) + ")"


_MONTHS = {_fold(k): v for d in (_MONTHS_EN, _MONTH_ABBR_EN, _MONTHS_FR, _MONTHS_DE, _MONTHS_ES) for k, v in d.items()}
_WEEKDAYS = {_fold(k): v for d in (_WEEKDAYS_EN, _WEEKDAYS_FR, _WEEKDAYS_DE, _WEEKDAYS_ES) for k, v in d.items()}
_NUMBERS = {_fold(k): v for d in (_NUMBERS_EN, _NUMBERS_FR, _NUMBERS_DE, _NUMBERS_ES) for k, v in d.items()}


def _number(text: str) -> int:
    """Digits (any script), a number word of one of the languages, or a Chinese numeral (〇-九十九)."""
    text = text.strip()
    if text.isdecimal():
        return int(text)
    folded = _fold(text)
    if folded in _NUMBERS:
        return _NUMBERS[folded]
    if any(c not in _ZH_DIGITS and c != "十" for c in text) or not text:
        raise ValueError(f"not a number: {text!r}")
    if "十" not in text:  # digit by digit: 二〇二三
        return int("".join(str(_ZH_DIGITS[c]) for c in text))
    tens, _, units = text.partition("十")
    return (_ZH_DIGITS[tens] if tens else 1) * 10 + (_ZH_DIGITS[units] if units else 0)


def _month_number(text: str) -> int:
    folded = _fold(text).rstrip(".")
    return _MONTHS[folded] if folded in _MONTHS else _number(text)


def _relation(text: str | None) -> str | None:
    if text is None:
        return None
    folded = _fold(text)
    if folded in _RELATIONS:
        return _RELATIONS[folded]
    return next((rel for prefix, rel in _RELATION_PREFIXES if folded.startswith(prefix)), None)


def _previous_word(m: re.Match[str]) -> str:
    before = re.search(r"(\w+)\W*$", m.string[max(0, m.start() - 30) : m.start()])
    return _fold(before.group(1)) if before else ""


# ---------------------------------------------------------------------------------------------------
# rules: a pattern and what its match means


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


# ---------------------------------------------------------------------------------------------------
# the rules of each language


def _en_relative() -> list[_Rule]:
    table = [
        (r"the\s+day\s+before\s+yesterday", "day", -2),
        (r"the\s+day\s+after\s+tomorrow", "day", 2),
        (r"yesterday|last\s+night", "day", -1),
        (r"today|tonight|this\s+(?:morning|afternoon|evening)", "day", 0),
        (r"tomorrow", "day", 1),
        (r"the\s+week\s+before\s+last", "week", -2),
        (r"the\s+month\s+before\s+last", "month", -2),
        (r"the\s+year\s+before\s+last", "year", -2),
    ]
    for unit in ("week", "month", "year", "weekend"):
        table += [
            (rf"(?:last|previous)\s+{unit}", unit, -1),
            (rf"(?:this|current)\s+{unit}", unit, 0),
            (rf"next\s+{unit}", unit, 1),
        ]
    numbers = _alt(_NUMBERS_EN)
    return [
        _phrases("en", table),
        _ago("en", rf"(?P<n>\d{{1,3}}|{numbers})\s+(?P<unit>days?|weeks?|months?|years?)\s+ago"),
        _weekdays("en", rf"(?P<rel>last|on|this\s+past|past|next)\s+(?P<wd>{_alt(_WEEKDAYS_EN)})"),
        _Rule("en", _rx(r"(?P<dir>earlier|later)\s+(?:this\s+(?P<unit>week|month|year)|today)"), _earlier_later),
        _Rule("en", _rx(r"(?P<rel>last|this|next)\s+(?P<season>spring|summer|autumn|fall|winter)"), _season),
        _Rule(
            "en",
            _rx(rf"(?:(?:in|during)\s+)?(?:the\s+)?(?P<season>spring|summer|autumn|fall|winter)\s+(?:of\s+)?{_YEAR}"),
            _season,
        ),
    ]


def _en_dates() -> list[_Rule]:
    full, any_month = _alt(_MONTHS_EN), _alt(_MONTHS_EN | _MONTH_ABBR_EN)
    weekday = rf"(?:{_alt(_WEEKDAYS_EN)}),?\s+"
    day_month = rf"(?:{weekday})?(?:the\s+)?{_DAY}{_ORD_EN}\s+(?P<of>of\s+)?(?P<month>{any_month})"
    month_day = rf"(?:{weekday})?(?P<month>{any_month})\.?\s+{_DAY}{_ORD_EN}"
    year = rf"(?:\.?,?\s+{_YEAR})?"
    within = r"(?:(?:in|during)\s+(?:(?:early|mid|late)[\s\-]+)?|(?:early|mid|late)[\s\-]+)"
    return [
        _dates("en", rf"(?P<pre>on\s+(?:the\s+)?|the\s+)?{day_month}{year}", check=_en_day_month_ok),
        _dates("en", rf"(?P<pre>on\s+)?{month_day}{year}", check=_en_month_day_ok),
        _dates("en", rf"(?:the\s+)?week\s+of\s+(?:the\s+)?{day_month}{year}", week=True),
        _dates("en", rf"(?:the\s+)?week\s+of\s+{month_day}{year}", week=True),
        _dates("en", rf"{within}?(?P<month>{any_month})\.?,?\s+(?:of\s+)?{_YEAR}"),
        _dates("en", rf"{within}(?P<month>{full})"),
        _dates("en", rf"(?P<month>{_alt(_SAFE_EN)})"),
        _dates("en", rf"(?P<rel>last|this|next)\s+(?P<month>{full})"),
        _dates("en", rf"(?:(?:in|during)\s+)?(?P<month>{full})\s+(?:of\s+)?(?P<yrel>last|this|next)\s+year"),
        _years(
            "en",
            rf"(?:(?:in|during)\s+(?:the\s+year\s+|(?:early|mid|late)[\s\-]+)?|the\s+year\s+|(?:early|mid|late)[\s\-]+)"
            rf"{_YEAR}{_COUNT_NOUNS}",
        ),
        *_ranges("en", r"between", r"and", full),
        *_ranges("en", r"from", r"(?:to|until|till|through)", full),
    ]


def _en_day_month_ok(m: re.Match[str], ctx: _Ctx) -> bool:
    """ "3 may attend": an ambiguous month after a bare number needs "on", "the", "of", "3rd" or a capital."""
    if m["year"] or _fold(m["month"]) not in _AMBIGUOUS_EN:
        return True
    return bool(m["pre"] or m["ord"] or m["of"] or m["month"][0].isupper())


def _en_month_day_ok(m: re.Match[str], ctx: _Ctx) -> bool:
    """ "May 8 people attend?": an ambiguous month before a bare number needs "on" or "8th"."""
    return bool(m["year"] or _fold(m["month"]) not in _AMBIGUOUS_EN or m["pre"] or m["ord"])


def _earlier_later(m: re.Match[str], ctx: _Ctx) -> _Span | None:
    """ "earlier this year": from the start of the year to now; "later this week": now to its end."""
    start, end, granularity = _shift(ctx, m["unit"].lower() if m["unit"] else "day", 0)
    return (start, ctx.now, granularity) if m["dir"].lower() == "earlier" else (ctx.now, end, granularity)


def _season(m: re.Match[str], ctx: _Ctx) -> _Span | None:
    """A meteorological season: winter YEAR starts in December of YEAR; "last" is the latest one over."""
    first = _SEASONS[m["season"].lower()]
    if m.groupdict().get("year"):
        return _season_span(ctx, first, int(m["year"]))
    relation, today = m["rel"].lower(), ctx.today
    if relation == "this":
        return _season_span(ctx, first, today.year - 1 if first == 12 and today.month < 3 else today.year)
    years = range(today.year, today.year - 3, -1) if relation == "last" else range(today.year - 1, today.year + 2)
    for year in years:
        span = _season_span(ctx, first, year)
        if (span[1] <= _at(ctx, today)) if relation == "last" else (span[0] > ctx.now):
            return span
    return None


def _fr_rules() -> list[_Rule]:
    last = r"(?:derni[eè]re?|pass[ée]e?|pr[ée]c[ée]dente?)"
    table = [
        (r"avant[\-\s]hier", "day", -2),
        (r"apr[eè]s[\-\s]demain", "day", 2),
        (r"aujourd['’]hui|ce\s+(?:matin|soir)", "day", 0),
        (r"demain", "day", 1),
        (rf"(?:la\s+)?semaine\s+{last}", "week", -1),
        (r"cette\s+semaine", "week", 0),
        (r"(?:la\s+)?semaine\s+prochaine", "week", 1),
        (rf"(?:le\s+)?mois\s+{last}", "month", -1),
        (r"ce\s+mois(?:-ci)?", "month", 0),
        (r"(?:le\s+)?mois\s+prochain", "month", 1),
        (rf"(?:l['’]\s*)?(?:ann[ée]e|an)\s+{last}", "year", -1),
        (r"cette\s+ann[ée]e", "year", 0),
        (r"(?:l['’]\s*)?(?:ann[ée]e\s+prochaine|an\s+prochain)", "year", 1),
        (rf"(?:le\s+)?week-?end\s+{last}", "weekend", -1),
        (r"ce\s+week-?end", "weekend", 0),
    ]
    month, weekday = _alt(_MONTHS_FR), _alt(_WEEKDAYS_FR)
    within = r"(?:(?:en|durant|pendant)\s+|au\s+mois\s+d(?:e\s+|['’]\s*)|(?:d[ée]but|fin)\s+|mi-)"
    return [
        _phrases("fr", table),
        _guarded_day("fr", r"hier", -1, frozenset(), check=_not_german),
        _ago(
            "fr", rf"il\s+y\s+a\s+(?P<n>\d{{1,3}}|{_alt(_NUMBERS_FR)})\s+(?P<unit>jours?|semaines?|mois|ans|ann[ée]es?)"
        ),
        _dates("fr", rf"(?:le\s+)?(?:{weekday}\s+)?{_DAY}(?:er)?\s+(?P<month>{month})(?:\s+{_YEAR})?"),
        _dates("fr", rf"(?:en\s+)?(?P<month>{month})\s+{_YEAR}"),
        _dates("fr", rf"{within}(?P<month>{month})"),
        _dates("fr", rf"(?:en\s+)?(?P<month>{month})\s+(?P<rel>dernier|pass[ée]|prochain)"),
        _weekdays(
            "fr", rf"(?P<wd>{weekday})(?:\s+(?P<rel>dernier|pass[ée]|prochain)|(?!\s+gras))", check=_fr_weekday_ok
        ),
        _years(
            "fr", rf"(?:(?:en|durant|pendant)\s+(?:l['’]\s*an(?:n[ée]e)?\s+)?|l['’]\s*ann[ée]e\s+){_YEAR}{_COUNT_NOUNS}"
        ),
        *_ranges("fr", r"entre", r"et", month),
        *_ranges("fr", r"(?:de|d['’])", r"(?:à|a|jusqu['’]\s*(?:à|en))", month),
    ]


def _not_german(m: re.Match[str], ctx: _Ctx) -> bool:
    """French "hier" (yesterday) is German "hier" (here): with no language given, not in German text."""
    return not ctx.guessing or _GERMAN_WORDS.search(m.string) is None


def _fr_weekday_ok(m: re.Match[str], ctx: _Ctx) -> bool:
    """A bare "lundi" is a past Monday, but "le lundi" is every Monday; with no language given, a bare
    weekday needs French around it ("Mardi Gras" in English text is not a Tuesday)."""
    if m["rel"]:
        return True
    if _previous_word(m) in {"le", "les", "chaque", "tous", "toutes"}:
        return False
    return not ctx.guessing or _FRENCH_WORDS.search(m.string) is not None


def _de_rules() -> list[_Rule]:
    prev, this, following = (
        r"(?:letzt|vorig|vergangen)e[nmrs]?",
        r"dies(?:e[nmrs]?)?",
        r"(?:n(?:ä|ae|a)chst|kommend)e[nmrs]?",
    )
    part_of_day = r"(?:\s+(?:fr(?:ü|ue|u)h|Morgen|Vormittag|Mittag|Nachmittag|Abend|Nacht))?"
    table = [(r"vorgestern", "day", -2), (r"(?:ü|ue)bermorgen", "day", 2)]
    table += [(rf"gestern{part_of_day}", "day", -1), (rf"heute{part_of_day}", "day", 0)]
    for unit, word in (
        ("week", r"Woche"),
        ("month", r"Monats?"),
        ("year", r"Jahr(?:e?s)?"),
        ("weekend", r"Wochenende"),
    ):
        table += [(rf"{prev}\s+{word}", unit, -1), (rf"{this}\s+{word}", unit, 0), (rf"{following}\s+{word}", unit, 1)]
    month, weekday = _alt(_MONTHS_DE), _alt(_WEEKDAYS_DE)
    numbers = _alt(_NUMBERS_DE)
    after_not = frozenset({"am", "den", "jeden", "guten", "einem", "der", "diesen", "vom", "zum", "heute", "gestern"})
    return [
        _phrases("de", table),
        # "Morgen" (capitalised) is the morning; only the adverb "morgen" is tomorrow
        _guarded_day(
            "de", r"(?-i:morgen)(?:\s+(?:fr(?:ü|ue)h|Vormittag|Mittag|Nachmittag|Abend|Nacht))?", 1, after_not
        ),
        _ago("de", rf"vor\s+(?P<n>\d{{1,3}}|{numbers})\s+(?P<unit>Tag(?:en?)?|Wochen?|Monat(?:en?)?|Jahr(?:en?)?)"),
        _dates(
            "de", rf"(?:(?:am|vom)\s+)?(?:{weekday},?\s+)?(?:de[nm]\s+)?{_DAY}\.\s*(?P<month>{month})(?:\s+{_YEAR})?"
        ),
        _dates("de", rf"(?:(?:am|vom)\s+)?{_DAY}\.(?P<month>1[0-2]|0?[1-9])\.{_YEAR}"),
        _dates("de", rf"(?:im\s+)?(?P<month>{month})\s+{_YEAR}"),
        _dates("de", rf"(?:im|Anfang|Mitte|Ende)\s+(?P<month>{month})"),
        _dates("de", rf"(?P<rel>{prev}|{this}|{following})\s+(?P<month>{month})"),
        _weekdays("de", rf"(?P<rel>am|{prev}|{following})\s+(?P<wd>{weekday})"),
        _years("de", rf"(?:im\s+Jahre?|in|w(?:ä|ae)hrend)\s+{_YEAR}{_COUNT_NOUNS}"),
        *_ranges("de", r"zwischen", r"und", month),
        *_ranges("de", r"von", r"bis(?:\s+(?:zum|Ende))?", month),
    ]


def _es_rules() -> list[_Rule]:
    nxt = r"(?:pr[óo]xim[oa])"
    table = [
        (r"anteayer|antier|antes\s+de\s+ayer", "day", -2),
        (r"pasado\s+mañana", "day", 2),
        (r"ayer|anoche", "day", -1),
        (r"hoy(?!\s+(?:en\s+)?d[ií]a)|esta\s+(?:mañana|tarde|noche)", "day", 0),
        (r"(?:la\s+)?(?:semana\s+(?:pasada|anterior)|pasada\s+semana)", "week", -1),
        (r"esta\s+semana", "week", 0),
        (rf"(?:la\s+)?(?:{nxt}\s+semana|semana\s+(?:{nxt}|que\s+viene))", "week", 1),
        (r"(?:el\s+)?(?:mes\s+(?:pasado|anterior)|pasado\s+mes)", "month", -1),
        (r"este\s+mes", "month", 0),
        (rf"(?:el\s+)?(?:{nxt}\s+mes|mes\s+(?:{nxt}|que\s+viene))", "month", 1),
        (r"(?:el\s+)?(?:año\s+(?:pasado|anterior)|pasado\s+año)", "year", -1),
        (r"este\s+año", "year", 0),
        (rf"(?:el\s+)?(?:{nxt}\s+año|año\s+(?:{nxt}|que\s+viene))", "year", 1),
        (r"(?:el\s+)?(?:fin\s+de\s+semana\s+pasado|pasado\s+fin\s+de\s+semana)", "weekend", -1),
        (r"este\s+fin\s+de\s+semana", "weekend", 0),
    ]
    month, weekday = _alt(_MONTHS_ES), _alt(_WEEKDAYS_ES)
    article = frozenset(
        {"la", "las", "una", "cada", "toda", "esta", "esa", "aquella", "buena", "de", "media", "mi", "su"}
    )
    return [
        _phrases("es", table),
        _guarded_day("es", r"mañana", 1, article),  # "la mañana" is the morning
        _ago("es", rf"hace\s+(?P<n>\d{{1,3}}|{_alt(_NUMBERS_ES)})\s+(?P<unit>d[ií]as?|semanas?|mes(?:es)?|años?)"),
        _dates("es", rf"(?:el\s+)?(?:{weekday}\s+)?{_DAY}\s+de\s+(?P<month>{month})(?:\s+(?:del?\s+)?{_YEAR})?"),
        _dates("es", rf"(?:(?:en|durante)\s+)?(?P<month>{month})\s+(?:del?\s+)?{_YEAR}"),
        _dates(
            "es",
            rf"(?:(?:en|durante)\s+(?:el\s+mes\s+de\s+)?|a\s+(?:principios|mediados|finales)\s+de\s+)"
            rf"(?P<month>{month})",
        ),
        _dates("es", rf"(?:en\s+)?(?:el\s+)?(?P<month>{month})\s+(?P<rel>pasado|{nxt})"),
        _dates("es", rf"(?:el\s+)?(?P<rel>pasado|{nxt})\s+(?P<month>{month})"),
        _weekdays("es", rf"(?:el\s+)?(?P<wd>{weekday})\s+(?P<rel>pasado|anterior|{nxt}|que\s+viene)"),
        _weekdays("es", rf"(?:el\s+)?(?P<rel>pasado|{nxt})\s+(?P<wd>{weekday})"),
        _weekdays("es", rf"el\s+(?P<wd>{weekday})"),  # "los lunes" is every Monday
        _years("es", rf"(?:en|durante)\s+(?:el\s+(?:año\s+)?)?{_YEAR}{_COUNT_NOUNS}"),
        *_ranges("es", r"entre", r"y", month),
        *_ranges("es", r"(?:de|desde)", r"(?:a|hasta)", month),
    ]


def _zh_rules() -> list[_Rule]:
    week = r"(?:个)?(?:周|星期|礼拜)(?![末期])"
    table = [
        ("大前天", "day", -3), ("前天", "day", -2), ("昨天|昨日|昨晚|昨夜", "day", -1),
        ("今天|今日|今晚|今早|今夜", "day", 0), ("明天|明晚", "day", 1), ("后天", "day", 2), ("大后天", "day", 3),
        (f"上上{week}", "week", -2), (f"上{week}", "week", -1), (f"(?:这|本){week}", "week", 0), (f"下{week}", "week", 1),
        ("上上个月", "month", -2), ("上个?月", "month", -1), ("(?:这个?|本)月", "month", 0), ("下个?月", "month", 1),
        ("前年", "year", -2), ("去年", "year", -1), ("今年|本年", "year", 0), ("明年", "year", 1), ("后年", "year", 2),
        ("上个?周末", "weekend", -1), ("(?:这个?|本)周末", "weekend", 0), ("下个?周末", "weekend", 1),
    ]  # fmt: skip
    not_month = r"(?<![\d〇零一二三四五六七八九十两个年上下这本每几第])"
    return [
        _phrases("zh", table, words=False),
        _ago(
            "zh",
            rf"(?<![\d〇零一二三四五六七八九十两])(?P<n>\d{{1,3}}|{_ZH_NUM}{{1,3}})\s*"
            r"(?P<unit>天|周|年|星期|礼拜|个\s*(?:月|星期|礼拜|周))(?:之|以)?前(?![往进面台])",
            words=False,
        ),
        _Rule(
            "zh",
            _rx(
                r"(?P<rel>上上|上|这|本|下)?(?:个)?(?P<unit>周|星期|礼拜)(?P<wd>[一二三四五六日天1-7])"
                r"(?![起样直共些下点次定切般同块边道旦会个])",
                words=False,
            ),
            _zh_weekday,
        ),  # fmt: skip
        _dates("zh", rf"{_ZH_YEAR}\s*年\s*{_ZH_MONTH}\s*月\s*{_ZH_DAY}\s*[日号]", words=False),
        _dates("zh", rf"{_ZH_YEAR}\s*年\s*{_ZH_MONTH}\s*月(?:份)?", words=False),
        _years("zh", rf"{_ZH_YEAR}\s*年(?!代)", words=False),
        _dates(
            "zh",
            rf"(?P<yrel>前年|去年|今年|明年|后年)\s*{_ZH_MONTH}\s*月(?:份)?(?:\s*{_ZH_DAY}\s*[日号])?",
            words=False,
        ),
        _dates("zh", rf"{not_month}{_ZH_MONTH}\s*月\s*{_ZH_DAY}\s*[日号]", words=False),
        _dates("zh", rf"{not_month}{_ZH_MONTH}\s*月(?:份)?(?![\d〇零一二三四五六七八九十两亮球光饼])", words=False),
        *_ranges("zh", r"(?:从|自)", r"(?:到|至)", _ZH_MONTH.replace("(?P<month>", "(?:"), zh=True),
    ]


def _zh_weekday(m: re.Match[str], ctx: _Ctx) -> _Span | None:
    """上周一 is the Monday of last week, 这周五 this week's Friday; a bare 星期一 the latest past Monday.
    Not 每周一 (every Monday), 两周一次 (once in two weeks) nor 周一说 (Zhou Yi, a name, said)."""
    weekday = _WEEKDAYS_ZH[m["wd"]] if m["wd"] in _WEEKDAYS_ZH else int(m["wd"]) - 1
    if m["rel"]:
        steps = {"上上": -2, "上": -1, "这": 0, "本": 0, "下": 1}[m["rel"]]
        return _days(ctx, _monday(ctx.today) + timedelta(weeks=steps, days=weekday), 1, "day")
    before, after = m.string[max(0, m.start() - 1) : m.start()], m.string[m.end() : m.end() + 1]
    if before and (before in "每几" or before in _ZH_DIGITS or before.isdecimal() or before == "十"):
        return None
    if m["unit"] == "周" and after and after in "说讲告问跟给":
        return None
    return _days(ctx, _weekday_date(ctx, weekday, "last"), 1, "day")


def _iso_dates() -> list[_Rule]:
    body = r"(?<![0-9A-Za-z_.\-/])(?P<year>[12][0-9]{3})-(?P<month>0[1-9]|1[0-2])-(?P<day>0[1-9]|[12][0-9]|3[01])"
    return [_dates("*", body + r"(?=$|[^0-9A-Za-z_\-/]|T\d)", words=False)]


@cache
def _rules() -> tuple[_Rule, ...]:
    """Compiled once, on first use: importing the module stays cheap."""
    return tuple(_en_relative() + _en_dates() + _fr_rules() + _de_rules() + _es_rules() + _zh_rules() + _iso_dates())


# ---------------------------------------------------------------------------------------------------
# from matches to mentions


def _opens_range(lang: str, text: str, start: int, end: int) -> bool:
    languages = LANGUAGES if lang == "*" else (lang,)
    before, after = text[max(0, start - 40) : start], text[end : end + 10]
    return any(
        (lg in _OPEN_BEFORE and _OPEN_BEFORE[lg].search(before) is not None)
        or (lg in _OPEN_AFTER and _OPEN_AFTER[lg].search(after) is not None)
        for lg in languages
    )


def _mention(rule: _Rule, m: re.Match[str], ctx: _Ctx) -> tuple[TimeMention, bool] | None:
    """The mention of a match, and whether it opens a range (it is then dropped, but still blocks the
    shorter matches inside it: in "avant le 8 mai 2023", "mai 2023" is no closed period either)."""
    try:
        span = rule.resolve(m, ctx)
    except (ValueError, OverflowError):  # a day or year the calendar does not have (31 June, year 10000)
        return None
    if span is None:
        return None
    start, end = span[0].astimezone(UTC), span[1].astimezone(UTC)
    if start >= end:
        return None
    return TimeMention(start, end, m.group(0), m.span(), span[2]), _opens_range(rule.lang, m.string, *m.span())


def _longest(found: list[tuple[TimeMention, bool]]) -> list[TimeMention]:
    """The longest mentions that do not overlap (ties: the first), in text order, without those that
    open a range."""
    kept: list[tuple[TimeMention, bool]] = []
    for mention, opens in sorted(found, key=lambda x: (x[0].span[0] - x[0].span[1], x[0].span[0])):
        if all(mention.span[1] <= k.span[0] or mention.span[0] >= k.span[1] for k, _ in kept):
            kept.append((mention, opens))
    return sorted((mention for mention, opens in kept if not opens), key=lambda x: x.span[0])
