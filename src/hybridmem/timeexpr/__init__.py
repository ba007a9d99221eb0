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

Overlapping matches keep the longest (then the first), returned in text order. The package is pure
(standard library only, no other hybridmem import): it sits in the ground layer. Its modules: the
words of each language (:mod:`.vocab`), folding and numbers (:mod:`.words`), calendar arithmetic
(:mod:`.spans`), the rule builders (:mod:`.rules`) and each language's rules (:mod:`.languages`),
the matching (:mod:`.parser`), stored timestamps (:mod:`.timestamps`), *when* questions (:mod:`.asks`).
"""

from __future__ import annotations

from .asks import asks_when
from .parser import TimeMention, find_time_expressions
from .timestamps import parse_timestamp
from .vocab import LANGUAGES, TIME_WORDS

__all__ = ["LANGUAGES", "TIME_WORDS", "TimeMention", "asks_when", "find_time_expressions", "parse_timestamp"]
