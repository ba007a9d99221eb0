"""Time expressions in questions (five languages, exact ranges, the traps) and parse_timestamp."""

from __future__ import annotations

import math
import time
from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from hybridmem.timeexpr import LANGUAGES, TimeMention, find_time_expressions, parse_timestamp

NOW = datetime(2023, 7, 12, 15, 0, tzinfo=UTC)  # a Wednesday; its ISO week is 10-17 July
NEW_YEAR = datetime(2024, 1, 3, 15, 0, tzinfo=UTC)  # a Wednesday; its ISO week is 1-8 January


def at(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, tzinfo=UTC)


def day(y: int, m: int, d: int) -> tuple[datetime, datetime]:
    return at(y, m, d), at(y, m, d) + timedelta(days=1)


def week(y: int, m: int, d: int) -> tuple[datetime, datetime]:
    """The ISO week starting on Monday y-m-d."""
    assert date(y, m, d).weekday() == 0
    return at(y, m, d), at(y, m, d) + timedelta(days=7)


def month(y: int, m: int) -> tuple[datetime, datetime]:
    return at(y, m, 1), (at(y + 1, 1, 1) if m == 12 else at(y, m + 1, 1))


def year(y: int) -> tuple[datetime, datetime]:
    return at(y, 1, 1), at(y + 1, 1, 1)


# (language, question, now, expected range or None for "no mention at all")
EN = [
    ("en", "What did I do yesterday?", NOW, day(2023, 7, 11)),
    ("en", "What is on my calendar today?", NOW, day(2023, 7, 12)),
    ("en", "What should I prepare for tomorrow?", NOW, day(2023, 7, 13)),
    ("en", "What happened the day before yesterday?", NOW, day(2023, 7, 10)),
    ("en", "Who did I meet last week?", NOW, week(2023, 7, 3)),
    ("en", "What happened this week?", NOW, week(2023, 7, 10)),
    ("en", "What are the plans for next week?", NOW, week(2023, 7, 17)),
    ("en", "How much did I spend last month?", NOW, month(2023, 6)),
    ("en", "What did we ship this month?", NOW, month(2023, 7)),
    ("en", "Where did I travel last year?", NOW, year(2022)),
    ("en", "What did we decide this year?", NOW, year(2023)),
    ("en", "What did Caroline say two weeks ago?", NOW, week(2023, 6, 26)),
    ("en", "What did I eat 3 days ago?", NOW, day(2023, 7, 9)),
    ("en", "Which book did I finish two months ago?", NOW, month(2023, 5)),
    ("en", "What did I say a year ago?", NOW, year(2022)),
    ("en", "Who did I call last Monday?", NOW, day(2023, 7, 10)),
    ("en", "What did Melanie paint on Friday?", NOW, day(2023, 7, 7)),
    ("en", "What did I do last Wednesday?", NOW, day(2023, 7, 5)),
    ("en", "Who is coming next Friday?", NOW, day(2023, 7, 14)),
    ("en", "What happened in May 2023?", NOW, month(2023, 5)),
    ("en", "What did we discuss in May, 2023?", NOW, month(2023, 5)),
    ("en", "Where was I in May?", NOW, month(2023, 5)),
    ("en", "What did I do in August?", NOW, month(2022, 8)),
    ("en", "Where did I go last May?", NOW, month(2023, 5)),
    ("en", "Where did I go last July?", NOW, month(2022, 7)),
    ("en", "What happened on 8 May 2023?", NOW, day(2023, 5, 8)),
    ("en", "What happened on May 8, 2023?", NOW, day(2023, 5, 8)),
    ("en", "What did I buy on 8 May?", NOW, day(2023, 5, 8)),
    ("en", "What did I do on 20 July?", NOW, day(2022, 7, 20)),
    ("en", "What happened in 2022?", NOW, year(2022)),
    ("en", "What changed during 2022?", NOW, year(2022)),
    ("en", "What did I do the week of May 10, 2023?", NOW, week(2023, 5, 8)),
    ("en", "What did I learn earlier this year?", NOW, (at(2023, 1, 1), NOW)),
    ("en", "Where did we go last summer?", NOW, (at(2022, 6, 1), at(2022, 9, 1))),
    ("en", "What was logged on 2023-05-08?", NOW, day(2023, 5, 8)),
    ("en", "What did I do last weekend?", NOW, (at(2023, 7, 8), at(2023, 7, 10))),
    ("en", "What did May say in June?", NOW, month(2023, 6)),
    ("en", "Who may attend the May 2023 offsite?", NOW, month(2023, 5)),
    ("en", "What did we plan in October?", NOW, month(2022, 10)),
    ("en", "What did I pay last month?", NEW_YEAR, month(2023, 12)),
    ("en", "What did I read last week?", NEW_YEAR, week(2023, 12, 25)),
    ("en", "What were my goals last year?", NEW_YEAR, year(2023)),
    ("en", "What did I do in December?", NEW_YEAR, month(2023, 12)),
    ("en", "Where was I two weeks ago?", NEW_YEAR, week(2023, 12, 18)),
    ("en", "What did I do last December?", NEW_YEAR, month(2023, 12)),
    ("en", "What happened last winter?", NEW_YEAR, (at(2022, 12, 1), at(2023, 3, 1))),
    ("en", "What did I do on 31 December?", NEW_YEAR, day(2023, 12, 31)),
    ("en", "What happened between May and July?", NOW, (at(2023, 5, 1), at(2023, 8, 1))),
    ("en", "What did I do from November to February?", NOW, (at(2022, 11, 1), at(2023, 3, 1))),
    ("en", "Where did I live between 2019 and 2021?", NOW, (at(2019, 1, 1), at(2022, 1, 1))),
    ("en", "What happened in early 2023?", NOW, year(2023)),
]
EN_NEGATIVE = [
    ("en", "What did May say about the trip?", NOW, None),
    ("en", "May and Caroline went where?", NOW, None),
    ("en", "Who may attend the workshop?", NOW, None),
    ("en", "Should we march on the capital?", NOW, None),
    ("en", "What changed in the 2020 release of Postgres?", NOW, None),
    ("en", "Is version 2023.1 compatible?", NOW, None),
    ("en", "Does it run on Python 3.11?", NOW, None),
    ("en", "Why did the server return HTTP 504?", NOW, None),
    ("en", "What is ticket HEL-4040 about?", NOW, None),
    ("en", "Does the log use ISO 8601?", NOW, None),
    ("en", "Did we reach 2022 users?", NOW, None),
    ("en", "What was in the Black Friday sale?", NOW, None),
    ("en", "Can it finish in 1500 ms?", NOW, None),
    ("en", "Open today.py and explain it", NOW, None),
    ("en", "What did I do since May?", NOW, None),  # an open range: no closed period to give
    ("en", "Did May 8 people come?", NOW, None),
    ("en", "What happened between May and Caroline?", NOW, None),
]
FR = [
    ("fr", "Qu'est-ce que j'ai fait hier ?", NOW, day(2023, 7, 11)),
    ("fr", "Qu'ai-je mangé aujourd'hui ?", NOW, day(2023, 7, 12)),
    ("fr", "Que dois-je faire demain ?", NOW, day(2023, 7, 13)),
    ("fr", "Qu'ai-je fait avant-hier ?", NOW, day(2023, 7, 10)),
    ("fr", "Avec qui ai-je parlé la semaine dernière ?", NOW, week(2023, 7, 3)),
    ("fr", "Qu'ai-je lu la semaine passée ?", NOW, week(2023, 7, 3)),
    ("fr", "Qu'avons-nous décidé cette semaine ?", NOW, week(2023, 7, 10)),
    ("fr", "Où suis-je allé le mois dernier ?", NOW, month(2023, 6)),
    ("fr", "Qu'ai-je acheté l'année dernière ?", NOW, year(2022)),
    ("fr", "Qu'ai-je fait l'année passée ?", NOW, year(2022)),
    ("fr", "Qu'ai-je dit il y a deux semaines ?", NOW, week(2023, 6, 26)),
    ("fr", "Qu'ai-je noté il y a 3 jours ?", NOW, day(2023, 7, 9)),
    ("fr", "Où étais-je en mai 2023 ?", NOW, month(2023, 5)),
    ("fr", "Qu'ai-je fait en mai ?", NOW, month(2023, 5)),
    ("fr", "Qu'ai-je planté en août dernier ?", NOW, month(2022, 8)),
    ("fr", "Qu'est-il arrivé le 8 mai 2023 ?", NOW, day(2023, 5, 8)),
    ("fr", "Qu'ai-je fait le 14 juillet ?", NOW, day(2022, 7, 14)),
    ("fr", "Qui ai-je vu lundi dernier ?", NOW, day(2023, 7, 10)),
    ("fr", "Qu'ai-je fait en 2022 ?", NOW, year(2022)),
    ("fr", "Qu'ai-je payé le mois dernier ?", NEW_YEAR, month(2023, 12)),
    ("fr", "Qu'ai-je fait l'an dernier ?", NEW_YEAR, year(2023)),
    ("fr", "Qu'ai-je semé en mai dernier ?", NEW_YEAR, month(2023, 5)),
    ("fr", "Qu'ai-je fait entre mai et juillet ?", NOW, (at(2023, 5, 1), at(2023, 8, 1))),
]
FR_NEGATIVE = [
    ("fr", "Que sais-tu de la planète Mars ?", NOW, None),
    ("fr", "Qu'est-ce que je fais le lundi ?", NOW, None),  # every Monday
    ("fr", "Depuis hier, qu'ai-je fait ?", NOW, None),
    ("fr", "Combien de fois par semaine ?", NOW, None),
]
DE = [
    ("de", "Was habe ich gestern gemacht?", NOW, day(2023, 7, 11)),
    ("de", "Was steht heute an?", NOW, day(2023, 7, 12)),
    ("de", "Was mache ich morgen?", NOW, day(2023, 7, 13)),
    ("de", "Was habe ich heute Morgen gegessen?", NOW, day(2023, 7, 12)),
    ("de", "Was war vorgestern?", NOW, day(2023, 7, 10)),
    ("de", "Was habe ich letzte Woche gelesen?", NOW, week(2023, 7, 3)),
    ("de", "Wen habe ich vorige Woche getroffen?", NOW, week(2023, 7, 3)),
    ("de", "Was ist diese Woche passiert?", NOW, week(2023, 7, 10)),
    ("de", "Was habe ich letzten Monat gekauft?", NOW, month(2023, 6)),
    ("de", "Wo war ich letztes Jahr im Urlaub?", NOW, year(2022)),
    ("de", "Was habe ich vor zwei Wochen gesagt?", NOW, week(2023, 6, 26)),
    ("de", "Was war vor 3 Tagen?", NOW, day(2023, 7, 9)),
    ("de", "Was war im Mai 2023?", NOW, month(2023, 5)),
    ("de", "Was habe ich im August gemacht?", NOW, month(2022, 8)),
    ("de", "Was geschah am 8. Mai 2023?", NOW, day(2023, 5, 8)),
    ("de", "Was habe ich am 8.5.2023 gemacht?", NOW, day(2023, 5, 8)),
    ("de", "Wen habe ich letzten Montag angerufen?", NOW, day(2023, 7, 10)),
    ("de", "Was habe ich letzten Monat bezahlt?", NEW_YEAR, month(2023, 12)),
    ("de", "Was war letzte Woche?", NEW_YEAR, week(2023, 12, 25)),
    ("de", "Was war letztes Jahr los?", NEW_YEAR, year(2023)),
    ("de", "Was war zwischen Mai und Juli?", NOW, (at(2023, 5, 1), at(2023, 8, 1))),
]
DE_NEGATIVE = [
    ("de", "Was habe ich am Morgen gegessen?", NOW, None),
    ("de", "Guten Morgen, was gibt es Neues?", NOW, None),
    ("de", "Was hast du hier gesagt?", NOW, None),  # German "hier" is "here", not French "yesterday"
    ("de", "August hat was gesagt?", NOW, None),
    ("de", "Seit gestern regnet es?", NOW, None),
]
ES = [
    ("es", "¿Qué hice ayer?", NOW, day(2023, 7, 11)),
    ("es", "¿Qué tengo hoy?", NOW, day(2023, 7, 12)),
    ("es", "¿Qué haré mañana?", NOW, day(2023, 7, 13)),
    ("es", "¿Qué hice anteayer?", NOW, day(2023, 7, 10)),
    ("es", "¿Qué desayuné esta mañana?", NOW, day(2023, 7, 12)),
    ("es", "¿Con quién hablé la semana pasada?", NOW, week(2023, 7, 3)),
    ("es", "¿Qué pasó esta semana?", NOW, week(2023, 7, 10)),
    ("es", "¿Qué compré el mes pasado?", NOW, month(2023, 6)),
    ("es", "¿Adónde viajé el año pasado?", NOW, year(2022)),
    ("es", "¿Qué dije hace dos semanas?", NOW, week(2023, 6, 26)),
    ("es", "¿Qué pasó hace 3 días?", NOW, day(2023, 7, 9)),
    ("es", "¿Qué hice en mayo de 2023?", NOW, month(2023, 5)),
    ("es", "¿Qué hice en mayo?", NOW, month(2023, 5)),
    ("es", "¿Qué pasó el 8 de mayo de 2023?", NOW, day(2023, 5, 8)),
    ("es", "¿A quién vi el lunes pasado?", NOW, day(2023, 7, 10)),
    ("es", "¿Qué hice en 2022?", NOW, year(2022)),
    ("es", "¿Qué pagué el mes pasado?", NEW_YEAR, month(2023, 12)),
    ("es", "¿Qué hice en diciembre?", NEW_YEAR, month(2023, 12)),
    ("es", "¿Qué hice entre mayo y julio?", NOW, (at(2023, 5, 1), at(2023, 8, 1))),
]
ES_NEGATIVE = [
    ("es", "¿Qué hago por la mañana?", NOW, None),  # the morning, not tomorrow
    ("es", "¿Qué hace dos veces al día?", NOW, None),
    ("es", "¿Qué hago los lunes?", NOW, None),
    ("es", "Hoy en día, ¿quién usa fax?", NOW, None),
]
ZH = [
    ("zh", "我昨天做了什么?", NOW, day(2023, 7, 11)),
    ("zh", "今天有什么安排?", NOW, day(2023, 7, 12)),
    ("zh", "明天要做什么?", NOW, day(2023, 7, 13)),
    ("zh", "前天我去了哪里?", NOW, day(2023, 7, 10)),
    ("zh", "我上周读了什么书?", NOW, week(2023, 7, 3)),
    ("zh", "上个星期谁来过?", NOW, week(2023, 7, 3)),
    ("zh", "上星期我见了谁?", NOW, week(2023, 7, 3)),
    ("zh", "这周有什么会议?", NOW, week(2023, 7, 10)),
    ("zh", "本周的计划是什么?", NOW, week(2023, 7, 10)),
    ("zh", "上个月我花了多少钱?", NOW, month(2023, 6)),
    ("zh", "我去年去了哪里?", NOW, year(2022)),
    ("zh", "今年的目标是什么?", NOW, year(2023)),
    ("zh", "前年发生了什么?", NOW, year(2021)),
    ("zh", "去年五月我在做什么?", NOW, month(2022, 5)),
    ("zh", "去年5月我在哪里?", NOW, month(2022, 5)),
    ("zh", "2023年5月发生了什么?", NOW, month(2023, 5)),
    ("zh", "五月我做了什么?", NOW, month(2023, 5)),
    ("zh", "5月我做了什么?", NOW, month(2023, 5)),
    ("zh", "2023年5月8日发生了什么?", NOW, day(2023, 5, 8)),
    ("zh", "三天前我说了什么?", NOW, day(2023, 7, 9)),
    ("zh", "3天前的会议讲了什么?", NOW, day(2023, 7, 9)),
    ("zh", "两周前我见了谁?", NOW, week(2023, 6, 26)),
    ("zh", "两个星期前我们聊了什么?", NOW, week(2023, 6, 26)),
    ("zh", "上周一我做了什么?", NOW, day(2023, 7, 3)),  # the Monday of last week
    ("zh", "我们上周一起去了哪里?", NOW, week(2023, 7, 3)),  # 上周 + 一起 (together), not 上周一
    ("zh", "2022年我在哪里工作?", NOW, year(2022)),
    ("zh", "上个月的账单是多少?", NEW_YEAR, month(2023, 12)),
    ("zh", "去年我读了几本书?", NEW_YEAR, year(2023)),
    ("zh", "12月我去了哪里?", NEW_YEAR, month(2023, 12)),
    ("zh", "从5月到7月我做了什么?", NOW, (at(2023, 5, 1), at(2023, 8, 1))),
    ("zh", "2022年5月到7月我在哪里?", NOW, (at(2022, 5, 1), at(2022, 8, 1))),
]
ZH_NEGATIVE = [
    ("zh", "一个月有几天?", NOW, None),
    ("zh", "每周一开会吗?", NOW, None),  # every Monday
    ("zh", "这个项目需要几个月?", NOW, None),
    ("zh", "1990年代的音乐有哪些?", NOW, None),  # a decade
    ("zh", "从去年以来我读了什么?", NOW, None),  # an open range
]
ROWS = EN + EN_NEGATIVE + FR + FR_NEGATIVE + DE + DE_NEGATIVE + ES + ES_NEGATIVE + ZH + ZH_NEGATIVE


def test_table_covers_every_language():
    assert len(ROWS) >= 90
    assert sum(1 for row in ROWS if row[3] is None) >= 15
    for lang in LANGUAGES:
        assert sum(1 for row in ROWS if row[0] == lang) >= 12, lang


@pytest.mark.parametrize("lang, question, now, expected", ROWS, ids=[f"{r[0]}:{r[1]}" for r in ROWS])
@pytest.mark.parametrize("given", [True, False], ids=["lang", "all-languages"])
def test_question_table(lang, question, now, expected, given):
    found = find_time_expressions(question, now, lang if given else None)
    if expected is None:
        assert found == []
        return
    assert [(m.start, m.end) for m in found] == [expected]
    (mention,) = found
    assert mention.start.tzinfo is UTC and mention.end.tzinfo is UTC
    assert question[mention.span[0] : mention.span[1]] == mention.text


def test_mention_fields():
    q = "What did Caroline paint in May 2023 and what did she say two weeks ago?"
    first, second = find_time_expressions(q, NOW, "en")
    assert first == TimeMention(*month(2023, 5), "in May 2023", (q.index("in May"), q.index(" and")), "month")
    assert second == TimeMention(*week(2023, 6, 26), "two weeks ago", (q.index("two"), len(q) - 1), "week")


@pytest.mark.parametrize(
    "question, text, granularity",
    [
        ("What happened the day before yesterday?", "the day before yesterday", "day"),
        ("What did I learn earlier this year?", "earlier this year", "year"),
        ("Qu'ai-je fait il y a deux semaines ?", "il y a deux semaines", "week"),
        ("Was war vor 3 Tagen?", "vor 3 Tagen", "day"),
        ("¿Qué hice en mayo de 2023?", "en mayo de 2023", "month"),
        ("2023年5月8日发生了什么?", "2023年5月8日", "day"),
        ("What did I do last weekend?", "last weekend", "day"),
        ("Where did we go last summer?", "last summer", "month"),
        ("What happened in 2022?", "in 2022", "year"),
    ],
)
def test_longest_match_wins(question, text, granularity):
    (mention,) = find_time_expressions(question, NOW)
    assert (mention.text, mention.granularity) == (text, granularity)


def test_several_mentions_in_text_order():
    q = "Compare what I did yesterday with last week and with 3 days ago"
    found = find_time_expressions(q, NOW, "en")
    assert [m.text for m in found] == ["yesterday", "last week", "3 days ago"]
    assert [(m.start, m.end) for m in found] == [day(2023, 7, 11), week(2023, 7, 3), day(2023, 7, 9)]


def test_calendar_is_the_askers_zone():
    # 01:00 on 12 July in UTC+2 is still 11 July in UTC: "yesterday" is the asker's 11 July
    now = datetime(2023, 7, 12, 1, 0, tzinfo=timezone(timedelta(hours=2)))
    (mention,) = find_time_expressions("What did I do yesterday?", now, "en")
    assert (mention.start, mention.end) == (
        datetime(2023, 7, 10, 22, tzinfo=UTC),
        datetime(2023, 7, 11, 22, tzinfo=UTC),
    )


def test_naive_now_is_utc():
    naive = find_time_expressions("What did I do yesterday?", datetime(2023, 7, 12, 15, 0))
    assert [(m.start, m.end) for m in naive] == [day(2023, 7, 11)]


def test_weekday_named_today_is_a_week_ago():
    (mention,) = find_time_expressions("What did I do on Wednesday?", NOW, "en")
    assert (mention.start, mention.end) == day(2023, 7, 5)


def test_month_of_now_is_this_years():
    assert [(m.start, m.end) for m in find_time_expressions("in July", NOW, "en")] == [month(2023, 7)]
    assert [(m.start, m.end) for m in find_time_expressions("last July", NOW, "en")] == [month(2022, 7)]


def test_impossible_day_leaves_its_month():
    # 31 June is no day: the longer match resolves to nothing, and the month it names remains
    found = find_time_expressions("What happened on 31 June 2023?", NOW, "en")
    assert [(m.text, m.start, m.end) for m in found] == [("June 2023", *month(2023, 6))]
    assert find_time_expressions("What happened on 31 June?", NOW, "en") == []


@pytest.mark.parametrize(
    "lang, question",
    [
        ("en", "What did we discuss before last week?"),
        ("en", "What happened after yesterday's meeting?"),
        ("en", "What changed since 2022?"),
        ("fr", "Qu'ai-je fait depuis le mois dernier ?"),
        ("fr", "Qu'est-il arrivé avant le 8 mai 2023 ?"),
        ("de", "Was ist seit letzter Woche passiert?"),
        ("de", "Was war vor dem 8. Mai 2023?"),
        ("es", "¿Qué pasó desde el lunes pasado?"),
        ("es", "¿Qué hice antes del 8 de mayo de 2023?"),
        ("zh", "去年以来我读了什么?"),
        ("zh", "5月8日之前发生了什么?"),
    ],
)
def test_open_ranges_give_no_closed_period(lang, question):
    # "since May" read as May would drop June's memories: the module returns closed periods only
    assert find_time_expressions(question, NOW, lang) == []
    assert find_time_expressions(question, NOW) == []


def test_mention_in_a_range_phrase_is_not_dropped():
    # the range words are inside the mention (从…到, desde…hasta): nothing before it opens a range
    assert [m.text for m in find_time_expressions("desde marzo hasta mayo", NOW, "es")] == ["desde marzo hasta mayo"]


def test_long_input_stays_linear():
    # a pattern opening with an optional word then \s* once rescanned every run of spaces: 80 s here
    started = time.perf_counter()
    assert find_time_expressions("in" + " " * 20000 + "x" + "\t" * 20000, NOW) == []
    assert time.perf_counter() - started < 5


def test_language_tags_and_errors():
    assert len(find_time_expressions("What did I do yesterday?", NOW, "en-US")) == 1
    assert find_time_expressions("What did I do yesterday?", NOW, "fr") == []
    with pytest.raises(ValueError, match=r"lang: 'xx' is not supported \(one of en, fr, de, es, zh"):
        find_time_expressions("yesterday", NOW, "xx")
    with pytest.raises(TypeError, match="now: expected a datetime"):
        find_time_expressions("yesterday", "2023-07-12")  # type: ignore[arg-type]


# --- parse_timestamp -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, expected",
    [
        (datetime(2023, 5, 8, 13, 56), datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),  # naive = UTC
        (datetime(2023, 5, 8, 13, 56, tzinfo=timezone(timedelta(hours=2))), datetime(2023, 5, 8, 11, 56, tzinfo=UTC)),
        (date(2023, 5, 8), datetime(2023, 5, 8, tzinfo=UTC)),
        (0, datetime(1970, 1, 1, tzinfo=UTC)),
        (1683554160, datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        (86400.5, datetime(1970, 1, 2, 0, 0, 0, 500000, tzinfo=UTC)),
        (-86400, datetime(1969, 12, 31, tzinfo=UTC)),
        (253402300799, datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)),
        ("2023-05-08", datetime(2023, 5, 8, tzinfo=UTC)),
        ("2023-05-08T13:56", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("2023-05-08 13:56:00+02:00", datetime(2023, 5, 8, 11, 56, tzinfo=UTC)),
        ("2023-05-08T13:56:00Z", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("  2023-05-08T13:56:00Z\n", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("10:04 am on 19 June, 2023", datetime(2023, 6, 19, 10, 4, tzinfo=UTC)),
        ("12:30 am on 1 January, 2024", datetime(2024, 1, 1, 0, 30, tzinfo=UTC)),
        ("12:15 pm on 1 January 2024", datetime(2024, 1, 1, 12, 15, tzinfo=UTC)),
    ],
)
def test_parse_timestamp_accepts(value, expected):
    parsed = parse_timestamp(value)
    assert parsed == expected and parsed.tzinfo is UTC


def test_parse_timestamp_naive_string_is_utc():
    assert parse_timestamp("2023-05-08T13:56").utcoffset() == timedelta(0)


NOT_A_TIME = "is not a time (ISO 8601 like 2023-05-08T13:56:00Z, or epoch seconds)"


@pytest.mark.parametrize(
    "value, message",
    [
        ("yesterday-ish", f"timestamp: 'yesterday-ish' {NOT_A_TIME}"),
        ("", f"timestamp: '' {NOT_A_TIME}"),
        ("2023-02-30", f"timestamp: '2023-02-30' {NOT_A_TIME}"),
        ("13:56 pm on 8 May, 2023", f"timestamp: '13:56 pm on 8 May, 2023' {NOT_A_TIME}"),
        ("1:56 pm on 31 February, 2023", f"timestamp: '1:56 pm on 31 February, 2023' {NOT_A_TIME}"),
        ("1683554160", f"timestamp: '1683554160' {NOT_A_TIME}"),
        (True, f"timestamp: True {NOT_A_TIME}"),
        (None, f"timestamp: None {NOT_A_TIME}"),
        ([2023, 5, 8], f"timestamp: [2023, 5, 8] {NOT_A_TIME}"),
        (math.nan, "timestamp: nan is not a finite number of epoch seconds"),
        (math.inf, "timestamp: inf is not a finite number of epoch seconds"),
        (1e20, "timestamp: 1e+20 epoch seconds is outside the years 1-9999"),
        (253402300800, "timestamp: 253402300800 epoch seconds is outside the years 1-9999"),
        (-62135596801, "timestamp: -62135596801 epoch seconds is outside the years 1-9999"),
        (10**400, "epoch seconds is outside the years 1-9999"),
    ],
    ids=lambda v: repr(v)[:40] if not isinstance(v, str) or "ISO 8601" not in v else "",
)
def test_parse_timestamp_rejects(value, message):
    with pytest.raises(ValueError) as info:
        parse_timestamp(value)
    assert message in str(info.value)
    assert str(info.value).startswith("timestamp: ")


def test_parse_timestamp_names_the_field_and_truncates_the_value():
    with pytest.raises(ValueError) as info:
        parse_timestamp("x" * 200, field="metadata.date")
    message = str(info.value)
    assert message == f"metadata.date: '{'x' * 76}... {NOT_A_TIME}"
    assert len(message.split(" is not a time")[0]) == len("metadata.date: ") + 80
