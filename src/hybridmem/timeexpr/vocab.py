"""The words of each language the time expressions are read by (en, fr, de, es, zh): month,
weekday, number, unit and relative words, and the words around a mention that change what it means.
Data only: the rules that use them are in :mod:`.languages`."""

from __future__ import annotations

import re

#: the languages :func:`find_time_expressions` has rules for
LANGUAGES = ("en", "fr", "de", "es", "zh")

# ---------------------------------------------------------------------------------------------------
# word tables (keys are folded: lower case, no accents; see words._fold)

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
# words in context

#: words after a number that make it a count, not a year ("in 1500 ms", "in 2022 users")
_COUNT_NOUNS = (
    r"(?!\s+(?:users?|people|persons?|customers?|members?|employees?|items?|records?|rows?|files?|lines?"
    r"|bytes?|[kmgt]i?b|ms|seconds?|secs?|minutes?|mins?|hours?|steps?|tokens?|words?|documents?|docs?"
    r"|messages?|requests?|queries|errors?|times?|points?|dollars?|euros?|units?|releases?|versions?"
    r"|editions?|models?|pages?|characters?|chars?|km|miles?|meters?|kg|utilisateurs?|personnes?"
    r"|clients?|fichiers?|lignes?|mots?|fois|octets?|nutzer|benutzer|leute|personen|dateien|zeilen|mal"
    r"|usuarios?|personas?|archivos?|l[ií]neas?|palabras?|veces)(?![\w\-]))"
)

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
