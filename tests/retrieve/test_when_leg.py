"""The when leg (issue 17): a question that asks *when* gets, as one more RRF leg, the fused
candidates that say when (hold a time word), in their fused order. On LoCoMo it took the temporal
questions' nDCG@10 from 0.600 to 0.677 (docs/agent-memory.md).

Here: which questions ask when, in five languages (and which do not, though they hold "when" or
"quand" as a conjunction); the time words' index terms; the postings look-up every backend answers
(in-process postings, PostgreSQL's postings table) against a brute force; and the leg in a search
on both backends: what it ranks, the scores it adds by the contract's formula, when it stays out."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from hybridmem import Memory
from hybridmem.retrieve.scope import time_word_terms
from hybridmem.retrieve.search import WHEN_DEPTH
from hybridmem.retrieve.sparse import SparseIndex
from hybridmem.text.tokenize import tokenize
from hybridmem.timeexpr import TIME_WORDS, asks_when

ASKS_WHEN = [
    "When did Caroline go to the LGBTQ support group?",
    "when was the billing pool raised",
    "When Caroline went to Paris?",
    "What year did we ship v2?",
    "Which month was the outage in?",
    "Since when is max_connections at 200?",
    "How long ago did Melanie paint the sunrise?",
    "At what time did the HEL-4040 alert fire?",
    "the migration — when was it?",
    "Quand est-ce que Marie a déménagé ?",
    "Quand Marie a-t-elle déménagé ?",
    "En quelle année le service a-t-il été créé ?",
    "Depuis quand le pool est-il à 40 ?",
    "À quelle heure la sauvegarde tourne-t-elle ?",
    "Wann haben wir den Pool vergrößert?",
    "Seit wann läuft der Dienst auf v2?",
    "In welchem Jahr wurde das Team gegründet?",
    "¿Cuándo se cayó el servidor?",
    "cuándo migramos la base de datos",
    "¿cuando se cayo el servidor?",
    "¿En qué año se fundó la empresa?",
    "我们什么时候迁移了数据库？",
    "他哪一年出生？",
    "事故是几月发生的？",
    "服务何时上线？",
]
DOES_NOT = [
    "What did Caroline say when she met Melanie?",
    "When she arrived, what did she say?",
    "Where does the user live now?",
    "What is the 2020 release about?",
    "Who is May?",
    "Tell me about the week-long retreat plan",
    "HTTP 504 on the billing pool",
    "Quand il pleut, que faisons-nous ?",
    "Il a dit non quand même",
    "Où habite Marie maintenant ?",
    "Wenn der Pool voll ist, was passiert?",
    "Was ist die Ursache von HEL-4040?",
    "Cuando llueve, ¿qué hacemos?",
    "¿Dónde vive el usuario ahora?",
    "数据库迁移的原因是什么？",
    "",
]


@pytest.mark.parametrize("q", ASKS_WHEN)
def test_questions_that_ask_when(q: str) -> None:
    assert asks_when(q)


@pytest.mark.parametrize("q", DOES_NOT)
def test_questions_that_do_not(q: str) -> None:
    assert not asks_when(q)


def test_the_time_words_are_index_terms_of_every_language() -> None:
    terms = set(time_word_terms())
    for lang, words in TIME_WORDS.items():
        own = set(tokenize(words, lang))
        assert len(own & terms) >= 15, lang  # each language keeps most of its words
    # a memory's text says when through the same tokens its index holds
    assert set(tokenize("We went there yesterday.", "en")) & terms == {"yesterday"}
    assert set(tokenize("On y est allés la semaine dernière.", "fr")) & terms
    assert set(tokenize("Wir waren letzte Woche dort.", "de")) & terms
    assert set(tokenize("Fuimos la semana pasada.", "es")) & terms
    assert set(tokenize("我们上周去了北京。", "zh")) & terms
    # another language's common word is not a time word: "Hi Mel", "at the end", "you may", "nous sommes"
    for text, lang in [("Hi Mel, at the end you may come", "en"), ("Nous sommes là", "fr"), ("HIV herb", "en")]:
        assert not set(tokenize(text, lang)) & terms, text


def test_holding_finds_the_chunks_that_hold_a_term() -> None:
    rng = random.Random(7)
    vocab = [f"w{i}" for i in range(40)]
    idx = SparseIndex()
    docs = {r: [rng.choice(vocab) for _ in range(rng.randint(1, 12))] for r in range(1, 400)}
    idx.load(1, [(r, " ".join(t)) for r, t in docs.items()])
    # rewrites and removals: positions are not rowids any more
    changed = {r: [rng.choice(vocab) for _ in range(5)] for r in rng.sample(sorted(docs), 60)}
    gone = rng.sample(sorted(set(docs) - set(changed)), 40)
    idx.apply(2, [(r, " ".join(t)) for r, t in changed.items()], gone)
    docs.update(changed)
    for r in gone:
        del docs[r]
    for _ in range(50):
        terms = rng.sample(vocab, rng.randint(1, 4)) + ["absent"]
        cands = rng.sample(range(1, 450), 80)  # some never were, some are gone
        expect = {r for r in cands if r in docs and set(docs[r]) & set(terms)}
        assert idx.holding(terms, cands) == expect
    assert idx.holding([], [1, 2]) == set() and idx.holding(["w1"], []) == set()


@pytest.mark.postgres
def test_postgres_postings_and_document_frequencies_answer_the_same(pg_url: str) -> None:
    from hybridmem.store.postgres import PostgresStore

    rng = random.Random(3)
    vocab = ["yesterday", "week", "pool", "billing", "hel-4040", "raise", "friday"]
    with Memory(pg_url, embedder="hash", auto_embed=False) as m:
        m.add_documents([{"id": f"d{i}", "text": " ".join(rng.choices(vocab, k=6))} for i in range(120)])
        store = m.store
        assert isinstance(store, PostgresStore)
        rows = {r.rowid: r.text for r in store.fetch(list(range(1, 400))).values()}
        for terms in (["yesterday"], ["week", "friday"], ["absent"]):
            cands = rng.sample(sorted(rows), 50)
            want = {r for r in cands if set(tokenize(rows[r], "en")) & set(tokenize(" ".join(terms), "en"))}
            assert store.holding("default", tokenize(" ".join(terms), "en"), cands) == want
            assert m.legs.holding("default", tokenize(" ".join(terms), "en"), cands) == want  # process leg
        assert store.holding("nowhere", ["week"], list(rows)) == set()
        # and the document frequencies the feedback leg weighs terms by: the process index's
        m.delete([f"d{i}" for i in range(0, 120, 7)])
        idx = SparseIndex()
        idx.load(1, store.tokens_for("default", list(range(1, 400))))
        terms = tokenize(" ".join(vocab), "en") + ["absent"]
        assert store.doc_freqs("default", terms) == idx.doc_freqs(terms)
        assert store.doc_freqs("default", terms)[0] == 120 - len(range(0, 120, 7))
        assert store.doc_freqs("nowhere", terms) == (0, {})


CHAT = [
    ("Ana", "Did you see the billing pool graphs from the load test?", "2023-05-08T09:00:00Z"),
    ("Bo", "Yes, the billing pool saturates at 40 connections under load.", "2023-05-08T09:01:00Z"),
    ("Ana", "We raised the billing pool to 80 yesterday, after the outage.", "2023-05-08T09:02:00Z"),
    ("Bo", "The billing pool change looks good so far in the dashboards.", "2023-05-08T09:03:00Z"),
    ("Ana", "Let us review the billing pool sizing again for the other services.", "2023-05-08T09:04:00Z"),
    ("Bo", "The billing pool of the reports service is the next one.", "2023-05-08T09:05:00Z"),
]


def _chat(m: Memory) -> None:
    m.add_messages(
        [{"role": "user", "name": who, "content": text, "timestamp": ts} for who, text, ts in CHAT], session_id="s1"
    )
    m.embed_pending()


def test_a_when_question_ranks_the_turn_that_says_when(target: str | Path) -> None:
    with Memory(target, embedder="hash", auto_embed=False) as m:
        _chat(m)
        q = "When was the billing pool raised?"
        res = m.search(q, session_id="s1", top_k=6)
        # the turn that says "yesterday", and the one after it (a turn's index holds the tail of the
        # turn before: Document.context)
        assert res.legs["when"].status == "ok" and res.legs["when"].returned == 2
        assert res.results[0].doc_id == "s1:2" and res.results[0].ranks["when"] == 1
        assert res.leg_weights["when"] == 1.0
        # the contract's score: the when leg is one more term Σ w / (k + rank)
        top = res.results[0]
        k = 60
        expect = sum(res.leg_weights[leg] / (k + rank) for leg, rank in top.ranks.items())
        assert top.rrf_score == pytest.approx(expect, rel=1e-6)
        assert res.total_retrieved == len(res.results)
        # without the leg (time_weight 0), the same candidates in their plain order
        plain = m.search(q, session_id="s1", top_k=6, hybrid_params={"time_weight": 0})
        assert "when" not in plain.legs and "when" not in plain.leg_weights
        assert {r.doc_id for r in plain.results} == {r.doc_id for r in res.results}
        assert all("when" not in r.ranks for r in plain.results)
        # a question that does not ask when has no when leg; nor have bm25 and vector modes
        assert "when" not in m.search("what did Ana say about the billing pool", session_id="s1").legs
        assert "when" not in m.search(q, session_id="s1", mode="bm25").legs


def _turns(m: Memory, texts: list[str], session: str = "s1") -> None:
    m.add_messages([{"role": "user", "name": "Ana", "content": t} for t in texts], session_id=session)
    m.embed_pending()


def test_the_when_leg_stays_out_when_it_would_only_echo_the_fusion(target: str | Path) -> None:
    with Memory(target, embedder="hash", auto_embed=False) as m:
        _turns(m, [f"billing pool note {i}" for i in range(5)])
        # no candidate says when: no leg, the order is the plain one
        q = "When was the billing pool raised?"
        res = m.search(q)
        assert res.legs["when"].returned == 0 and "when" not in res.leg_weights
        plain = m.search(q, hybrid_params={"time_weight": 0})
        assert [r.chunk_id for r in res.results] == [r.chunk_id for r in plain.results]
    with Memory(target, embedder="hash", auto_embed=False, namespace="all") as m:
        _turns(m, [f"billing pool raised yesterday {i}" for i in range(3)])
        # every candidate says when: the leg would change nothing
        res = m.search(q)
        assert "when" not in res.leg_weights and len(res.results) == 3


def test_documents_do_not_get_the_when_leg(target: str | Path) -> None:
    """A document dates its facts ("in 1857"); on XQuAD and HotpotQA a leg for paragraphs holding
    time words cost nDCG@10 (docs/agent-memory.md): only conversation turns take part."""
    with Memory(target, embedder="hash", auto_embed=False) as m:
        m.add_documents(
            [{"id": "a", "text": "The billing pool was raised yesterday."}]
            + [{"id": f"n{i}", "text": f"billing pool raised note {i}"} for i in range(4)]
        )
        m.embed_pending()
        res = m.search("When was the billing pool raised?")
        assert res.legs["when"].returned == 0 and "when" not in res.leg_weights
        # a document with a session and a turn number in its metadata is a turn (LoCoMo's loader)
        m.add("The billing pool was raised last week.", id="t", metadata={"session_id": "s9", "turn": 3})
        m.embed_pending()
        res = m.search("When was the billing pool raised?")
        assert res.legs["when"].returned == 1 and res.results[0].doc_id == "t"


def test_the_when_leg_looks_at_the_fused_top_only(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder="hash", auto_embed=False) as m:
        # many turns on the question's words, one far down that says when
        _turns(m, [f"billing pool raised note {i} " * 3 for i in range(WHEN_DEPTH + 20)])
        _turns(m, ["an unrelated line from yesterday about the pool"], session="s2")
        res = m.search("When was the billing pool raised?", top_k=5, hybrid_params={"dense_weight": 0})
        assert res.legs["when"].returned == 0  # below the fused top WHEN_DEPTH: not looked at
        near = m.search("When was the pool line from?", top_k=5, hybrid_params={"dense_weight": 0})
        assert near.legs["when"].returned == 1
