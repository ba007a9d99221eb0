"""Language-aware fusion: a question in one language over memories in another.

BM25 matches words, so across languages it has almost nothing to match and its ranks are noise
that equal-weight RRF still fuses at full weight (XQuAD English questions over German paragraphs:
BM25 0.58, dense 0.92, RRF 0.82 nDCG@10). The dense leg (multilingual e5) carries such a query.

The rule, parameter-free and per query: with ``cross`` the share of the dense leg's first
:data:`LANG_DEPTH` chunks whose language (detected at ingest, ``chunks.lang``) differs from the
question's (detected the same way), BM25's weight is multiplied by ``1 - cross``. A monolingual
memory gives ``cross = 0`` (nothing moves); a memory all in another language gives 1 (BM25 out);
a mixed one, the share of the question's neighbourhood that BM25 cannot read. Chunks or a
question without a detected language count for nothing (no change when none is known). The
exact-identifier leg keeps its weight: ``HEL-4040`` reads the same in every language.

Why the dense neighbourhood and not each chunk: discounting each BM25 hit by its own language
(tried) demotes the right chunk whenever the question's own language has near-duplicates, and
costs the demo's cross-language category; the share measures what the question is *about*.
docs/evaluation.md has the numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..models import LanguageReport
from ..store.base import Store
from ..text.tokenize import detect_language
from .types import LegHit

__all__ = ["LANG_DEPTH", "cross_language"]

#: how many of the dense leg's first chunks the share is read over
LANG_DEPTH = 10


def cross_language(store: Store, namespace: str, question: str, dense: Sequence[LegHit]) -> LanguageReport | None:
    """The question's language and the share of the dense leg's first chunks in another one (None
    when the question has no detected language or none of those chunks has one)."""
    qlang = detect_language(question)
    if qlang is None or not dense:
        return None
    langs = store.chunk_langs(namespace, [r for r, _ in dense[:LANG_DEPTH]])
    known = [lang for lang in langs.values() if lang]
    if not known:
        return None
    other = sum(lang != qlang for lang in known)
    return LanguageReport(question=qlang, cross_share=round(other / len(known), 6), read=len(known))
