"""Whether a question asks *when* (its answer is a time), per language."""

from __future__ import annotations

import re

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
