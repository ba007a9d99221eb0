"""The rules of each language (en, fr, de, es, zh) and the language-neutral ISO dates."""

from __future__ import annotations

import re
from datetime import timedelta
from functools import cache

from .rules import (
    _DAY,
    _ORD_EN,
    _YEAR,
    _ZH_DAY,
    _ZH_MONTH,
    _ZH_NUM,
    _ZH_YEAR,
    _ago,
    _dates,
    _guarded_day,
    _phrases,
    _ranges,
    _Rule,
    _rx,
    _weekdays,
    _years,
)
from .spans import _at, _Ctx, _days, _monday, _season_span, _shift, _Span, _weekday_date
from .vocab import (
    _AMBIGUOUS_EN,
    _COUNT_NOUNS,
    _FRENCH_WORDS,
    _GERMAN_WORDS,
    _MONTH_ABBR_EN,
    _MONTHS_DE,
    _MONTHS_EN,
    _MONTHS_ES,
    _MONTHS_FR,
    _NUMBERS_DE,
    _NUMBERS_EN,
    _NUMBERS_ES,
    _NUMBERS_FR,
    _SAFE_EN,
    _SEASONS,
    _WEEKDAYS_DE,
    _WEEKDAYS_EN,
    _WEEKDAYS_ES,
    _WEEKDAYS_FR,
    _WEEKDAYS_ZH,
    _ZH_DIGITS,
)
from .words import _alt, _fold, _previous_word


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
