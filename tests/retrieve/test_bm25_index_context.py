"""A chunk's index-only context (the turn a message answers) in BM25: only its last tokens are
indexed, so a reply is found by the question it answers but not by everything said before it; and a
re-index after a tokenizer change keeps the context (it used to re-tokenize the text alone)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from hybridmem import Memory
from hybridmem.text.tokenize import CONTEXT_TOKENS, TOKENIZER_VERSION, index_tokens, tokenize

QUESTION = (
    "Yesterday the quokkaflux cluster paged everyone twice during the night; "
    "where did the billing team move the zebrawave pool?"
)
CHAT = [
    {"role": "user", "name": "Ana", "content": QUESTION, "timestamp": "2023-05-02T09:00:00Z"},
    {"role": "assistant", "content": "To the eu-west region, last Tuesday.", "timestamp": "2023-05-02T09:01:00Z"},
]


def test_index_tokens_keep_the_last_tokens_of_the_context_then_the_text() -> None:
    text = "To the eu-west region, last Tuesday."
    assert index_tokens(text, "en") == tokenize(text, "en")
    assert index_tokens(text, "en", None) == index_tokens(text, "en", "") == tokenize(text, "en")
    ctx = tokenize(QUESTION, "en")
    assert len(ctx) > CONTEXT_TOKENS
    assert index_tokens(text, "en", QUESTION) == ctx[-CONTEXT_TOKENS:] + tokenize(text, "en")
    # a short context is indexed whole; Chinese has no spaces, the tail is counted in tokens too
    assert index_tokens(text, "en", "billing pool?") == tokenize("billing pool?", "en") + tokenize(text, "en")
    zh = "昨天夜里集群报警了两次，计费团队把连接池迁移到哪里了"
    assert index_tokens("迁到了欧洲", "zh", zh) == tokenize(zh, "zh")[-CONTEXT_TOKENS:] + tokenize("迁到了欧洲", "zh")


def _bm25(m: Memory, q: str) -> list[str]:
    return [r.doc_id for r in m.search(q, mode="bm25", session_id="s1").results]


def _reply_found_by_the_end_of_its_question(m: Memory) -> None:
    assert set(_bm25(m, "zebrawave pool")) == {"s1:0", "s1:1"}  # the reply too: it answers that
    assert _bm25(m, "quokkaflux") == ["s1:0"]  # the start of the question is not the reply's


def _set_tokenizer_version(target: str | Path, schema: str, value: str) -> None:
    if isinstance(target, Path):
        with sqlite3.connect(target) as db:
            db.execute("UPDATE meta SET value=? WHERE key='tokenizer_version'", (value,))
    else:
        import psycopg

        with psycopg.connect(target) as conn:
            conn.execute(f"UPDATE {schema}.meta SET value=%s WHERE key='tokenizer_version'", (value,))


def test_a_reply_is_found_by_the_end_of_the_turn_it_answers_also_after_a_reindex(target: str | Path) -> None:
    with Memory(target, embedder="hash", auto_embed=False) as m:
        m.add_messages(CHAT, session_id="s1")
        _reply_found_by_the_end_of_its_question(m)
        schema = getattr(m.store, "schema", "")
    # an older tokenizer's store is re-indexed on open: the contexts are re-tokenized with the text
    _set_tokenizer_version(target, schema, "4")
    with Memory(target, embedder="hash", auto_embed=False) as m:
        _reply_found_by_the_end_of_its_question(m)
        assert [r.text for r in m.search("billing", mode="bm25", session_id="s1", top_k=5).results] == [
            f"Ana: {QUESTION}",
            "assistant: To the eu-west region, last Tuesday.",
        ]
    if isinstance(target, Path):
        with sqlite3.connect(target) as db:
            assert db.execute("SELECT value FROM meta WHERE key='tokenizer_version'").fetchone()[0] == TOKENIZER_VERSION
