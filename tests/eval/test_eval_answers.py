"""Answer-level LoCoMo evaluation (``hybridmem eval --answer``): the lexical scores on hand-checked
examples, the whole loop on a real LoCoMo slice with scripted answerer and judge (categories, J,
tokens, cost), the cache (a re-run makes no call), faults (invalid judge JSON, a failing answerer),
the real OpenAI and Anthropic clients against a local server speaking their wire formats, and the
CLI's validation. The deterministic hash embedder throughout (no e5)."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import shared_path
from hybridmem.errors import ValidationError
from hybridmem.eval.answers import AnswerConfig, run_answer_eval, strip_citations
from hybridmem.eval.datasets import Dataset, load_dataset
from hybridmem.eval.judge import Verdict, bleu1, normalize_answer, token_f1
from hybridmem.eval.modes import EvalConfig
from hybridmem.eval.prices import PRICES, call_cost, load_prices, price_for
from hybridmem.eval.report.answers import render_answer_markdown, write_answer_report
from hybridmem.llm.registry import create_chat_model
from llm_fakes import FAST, FakeLLMServer, ScriptedChatModel, Seen

LIMIT = 10


# ------------------------------------------------------------------------------ lexical scores
def test_normalization_drops_case_punctuation_and_articles() -> None:
    assert normalize_answer("The Shell-Necklace, an heirloom!") == "shellnecklace heirloom"
    assert normalize_answer("  A   cat\tsat. ") == "cat sat"
    assert normalize_answer("Theatre at the Met") == "theatre at met"  # "the" only as a word


def test_token_f1_on_hand_checked_examples() -> None:
    assert token_f1("A shell necklace.", "a shell necklace") == 1.0
    # in / may / 2023 against 7 / may / 2023: 2 shared tokens, P = R = 2/3
    assert token_f1("in May 2023", "7 May 2023") == pytest.approx(2 / 3)
    # multisets: "may" thrice against once shares 1 token: P = 1/3, R = 1, F1 = 0.5
    assert token_f1("may may may", "May") == pytest.approx(0.5)
    # "Sweden" against "She moved from Sweden": P = 1/1, R = 1/4, F1 = 2 · 0.25 / 1.25 = 0.4
    assert token_f1("Sweden", "She moved from Sweden") == pytest.approx(0.4)
    assert token_f1("", "Sweden") == 0.0 and token_f1("the", "Sweden") == 0.0 and token_f1("Oslo", "Sweden") == 0.0


def test_bleu1_clips_counts_and_applies_the_brevity_penalty() -> None:
    assert bleu1("Psychology, counseling certification", "psychology counseling certification") == 1.0
    # 2 of 2 candidate tokens match, but the candidate (2) is shorter than the reference (3): exp(1 - 3/2)
    assert bleu1("May 2023", "7 May 2023") == pytest.approx(math.exp(-0.5))
    # "may" four times is clipped to its one occurrence in the reference: 1/4, no penalty (4 >= 2)
    assert bleu1("may may may may", "May 2023") == pytest.approx(0.25)
    # longer than the reference (6 tokens against 2): no penalty, precision 2/6
    assert bleu1("she went to Sweden in 2019", "Sweden 2019") == pytest.approx(2 / 6)
    assert bleu1("", "x") == 0.0


_WORDS = st.lists(
    st.sampled_from(["may", "2023", "sweden", "caroline", "painted", "sunrise", "7"]), min_size=1, max_size=8
)


@settings(max_examples=200, deadline=None)
@given(pred=_WORDS, ref=_WORDS)
def test_bleu1_agrees_with_nltk_sentence_bleu_on_unigrams(pred: list[str], ref: list[str]) -> None:
    """Oracle: NLTK's sentence BLEU with weights (1,) is the same clipped precision × brevity penalty."""
    nltk_bleu = pytest.importorskip("nltk.translate.bleu_score")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NLTK warns when no unigram matches (and returns 0)
        expected = nltk_bleu.sentence_bleu([ref], pred, weights=(1,))
    assert bleu1(" ".join(pred), " ".join(ref)) == pytest.approx(expected, abs=1e-12)


def test_citations_are_stripped_but_other_brackets_kept() -> None:
    ids = ["conv-26:D1:3#0", "conv-26:D2:1#0"]
    text = "She went in May [conv-26:D1:3#0] and again [conv-26:D1:3#0, conv-26:D2:1#0] [sic]."
    assert strip_citations(text, ids) == "She went in May and again [sic]."


def test_the_verdict_label_is_read_generously_and_nothing_else_passes() -> None:
    assert Verdict.model_validate({"reasoning": "same date", "label": " correct."}).label == "CORRECT"
    with pytest.raises(ValueError):
        Verdict.model_validate({"reasoning": "?", "label": "CORRECT or WRONG"})


# ------------------------------------------------------------------------------ prices
def test_prices_match_dated_variants_and_unknown_models_cost_unknown(tmp_path: Path) -> None:
    assert price_for("openai:gpt-4o-mini-2024-07-18", PRICES) == ("openai:gpt-4o-mini", (0.15, 0.60))
    assert price_for("openai:gpt-4o", PRICES) == ("openai:gpt-4o", (2.50, 10.00))
    assert call_cost("openai:gpt-4o-mini", 1_000_000, 1_000_000, PRICES) == pytest.approx(0.75)
    assert call_cost("openai:llama3.1:8b", 10, 10, PRICES) == "unknown"
    f = tmp_path / "prices.json"
    f.write_text(
        json.dumps({"openai:llama3.1:8b": {"input": 0, "output": 0}, "openai:gpt-4o": {"input": 1, "output": 2}})
    )
    table = load_prices(f)
    assert call_cost("openai:llama3.1:8b", 10, 10, table) == 0.0 and table["openai:gpt-4o"] == (1.0, 2.0)
    for bad, msg in (
        ({"gpt-4o": {"input": 1, "output": 2}}, "provider:model"),
        ({"openai:x": {"input": -1, "output": 2}}, "input must be a number"),
        ({"openai:x": {"input": 1}}, "must be"),
        ([1, 2], "JSON object"),
    ):
        f.write_text(json.dumps(bad))
        with pytest.raises(ValidationError, match=msg) as e:
            load_prices(f)
        assert e.value.field == "prices"


# ------------------------------------------------------------------------------ the loop on LoCoMo
@pytest.fixture(scope="module")
def locomo_slice(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first conversation of the shared LoCoMo file (conv-26), as its own LoCoMo file (in a
    temporary folder, never in the repository)."""
    items = json.loads(shared_path("data", "agentmem", "locomo", "locomo-shared.json").read_text())
    path = tmp_path_factory.mktemp("locomo") / "locomo-conv26.json"
    path.write_text(json.dumps(items[:1]))
    return path


_QUESTION = re.compile(r"^Question: (.*)$", re.M)
_GOLD = re.compile(r"^Gold answer: (.*)$", re.M)
_GENERATED = re.compile(r"^Generated answer: (.*)$", re.M)
_CHUNK = re.compile(r"^\[([^\]\n]+)\]", re.M)


def scripted_answerer(ds: Dataset, right: set[str], calls: list[str]) -> Callable[[list[Any]], str]:
    """Answers the gold answer for questions in ``right``, else "I do not know"; cites the first chunk."""
    gold_of = {ds.queries[q]: ds.answers[q] for q in ds.queries}

    def reply(messages: list[Any]) -> str:
        prompt = messages[-1]["content"]
        question = _QUESTION.findall(prompt)[-1]
        calls.append(question)
        first = _CHUNK.findall(prompt)[0]
        text = gold_of[question] if question in right else "I do not know"
        return json.dumps({"answer": f"{text} [{first}]", "citations": [first], "found": question in right})

    return reply


def scripted_judge(calls: list[str]) -> Callable[[list[Any]], str]:
    """CORRECT when the normalized gold answer is in the normalized generated answer."""

    def reply(messages: list[Any]) -> str:
        prompt = messages[-1]["content"]
        gold, generated = _GOLD.findall(prompt)[-1], _GENERATED.findall(prompt)[-1]
        calls.append(generated)
        ok = normalize_answer(gold) in normalize_answer(generated)
        return json.dumps({"reasoning": "compared", "label": "CORRECT" if ok else "WRONG"})

    return reply


def models(replies_a: Callable[..., str], replies_j: Callable[..., str]) -> tuple[ScriptedChatModel, ScriptedChatModel]:
    answerer = ScriptedChatModel([replies_a] * 1000)
    judge = ScriptedChatModel([replies_j] * 1000)
    judge.name = "scripted:judge"  # another model: priced apart
    return answerer, judge


def test_the_loop_scores_categories_j_tokens_and_cost_then_a_rerun_makes_no_call(
    locomo_slice: Path, tmp_path: Path
) -> None:
    ds = load_dataset(str(locomo_slice))
    qids = [q for q in ds.queries if ds.categories[q] != "adversarial"][:LIMIT]
    right = {ds.queries[q] for q in qids[::2]}  # every other question answered right
    a_calls: list[str] = []
    j_calls: list[str] = []
    answerer, judge = models(scripted_answerer(ds, right, a_calls), scripted_judge(j_calls))
    cfg = EvalConfig(modes=("hybrid", "bm25"), embedder="hash", cache_dir=tmp_path / "cache", limit=LIMIT)
    prices = {**PRICES, "scripted:test": (1.0, 2.0)}  # the judge stays unpriced
    acfg = AnswerConfig(answerer=answerer, judge=judge, prices=prices, concurrency=1)
    res = run_answer_eval(ds, cfg, acfg)

    expected_cats: dict[str, int] = {}
    for q in qids:
        expected_cats[ds.categories[q]] = expected_cats.get(ds.categories[q], 0) + 1
    assert res["dataset"]["categories"] == {"all": LIMIT, **expected_cats}
    assert res["dataset"]["adversarial_left_out"] == sum(1 for q in ds.queries if ds.categories[q] == "adversarial")
    for mode in ("hybrid", "bm25"):
        r = res["modes"][mode]
        assert r["queries"] == LIMIT and r["errors"] == {"answer": 0, "judge": 0}
        for cat, n in expected_cats.items():
            m = r["metrics"][cat]
            assert m["queries"] == n
            in_cat = [q for q in qids if ds.categories[q] == cat]
            assert m["correct"] == sum(1 for q in in_cat if ds.queries[q] in right)
            assert m["j"] == pytest.approx(m["correct"] / n)
        assert r["metrics"]["all"]["j"] == pytest.approx(len(right) / LIMIT)
        row = r["answers"][qids[0]]  # answered right: the gold answer, citation removed
        assert row["answer"] == ds.answers[qids[0]] and row["label"] == "CORRECT" and row["f1"] == 1.0
        assert row["cited"] == [row["retrieved"][0]]
        wrong = r["answers"][qids[1]]
        assert wrong["label"] == "WRONG" and wrong["answer"] == "I do not know" and wrong["j"] == 0.0
    # every (mode, question) answered and judged once, or found in the cache when both modes
    # retrieved the same turns (the same prompt)
    tok = res["tokens"]
    a, j = tok["answerer"], tok["judge"]
    assert a["calls"] == len(a_calls) and a["calls"] + a["cached"] == 2 * LIMIT
    assert j["calls"] == len(j_calls) and j["calls"] + j["cached"] == 2 * LIMIT
    assert a["prompt_tokens"] == 100 * a["calls"] and a["completion_tokens"] == 10 * a["calls"]
    assert a["prompt_tokens_all"] == 100 * 2 * LIMIT
    assert a["cost_usd_all"] == pytest.approx((2000 * 1.0 + 200 * 2.0) / 1e6)
    assert j["cost_usd"] == "unknown" and tok["cost_usd_all"] == "unknown"
    assert any("no price for scripted:judge" in n for n in res["notes"])
    assert tok["full_set"]["questions"] == res["dataset"]["questions_in_set"]
    assert [c["metric"] for c in res["comparisons"]] == ["j", "f1"] and res["comparisons"][0]["queries"] == LIMIT

    md = render_answer_markdown(res)
    assert "## By category" in md and "J per category" in md and "`hybrid`" in md and "Mem0" in md
    files = write_answer_report(res, tmp_path / "out")
    assert json.loads(files["json"].read_text())["modes"]["hybrid"]["answers"][qids[0]]["label"] == "CORRECT"

    # the re-run: new models that would fail if called; every answer and verdict comes from the cache
    answerer2 = ScriptedChatModel([RuntimeError("called despite the cache")] * 100)
    judge2 = ScriptedChatModel([RuntimeError("called despite the cache")] * 100)
    judge2.name = "scripted:judge"
    again = run_answer_eval(ds, cfg, AnswerConfig(answerer=answerer2, judge=judge2, prices=prices, concurrency=2))
    assert answerer2.seen == [] and judge2.seen == []
    assert again["tokens"]["calls"] == 0 and again["tokens"]["cached"] == 4 * LIMIT
    assert again["tokens"]["answerer"]["cost_usd"] == 0.0
    assert again["tokens"]["answerer"]["cost_usd_all"] == pytest.approx(a["cost_usd_all"])
    assert again["modes"]["hybrid"]["metrics"] == res["modes"]["hybrid"]["metrics"]
    assert any("a re-run costs nothing" in n for n in again["notes"])


def test_invalid_judge_json_is_repaired_or_counted_never_fatal(locomo_slice: Path, tmp_path: Path) -> None:
    ds = load_dataset(str(locomo_slice))
    qids = [q for q in ds.queries if ds.categories[q] != "adversarial"][:3]
    a_calls: list[str] = []
    answer = scripted_answerer(ds, {ds.queries[q] for q in qids}, a_calls)
    verdict = json.dumps({"reasoning": "same", "label": "CORRECT"})
    judge_script = [
        "The answer is CORRECT",  # q1: not JSON ...
        verdict,  # ... repaired
        "not json",  # q2: not JSON ...
        '{"label": "MAYBE"}',  # ... nor after the repair: an error, counted WRONG
        verdict,  # q3: fine
    ]
    answerer = ScriptedChatModel([answer] * 10)
    judge = ScriptedChatModel(judge_script)
    judge.name = "scripted:judge"
    cfg = EvalConfig(modes=("bm25",), embedder="hash", cache_dir=tmp_path / "cache", limit=3)
    res = run_answer_eval(ds, cfg, AnswerConfig(answerer=answerer, judge=judge, concurrency=1))
    r = res["modes"]["bm25"]
    rows = [r["answers"][q] for q in qids]
    assert [row["label"] for row in rows] == ["CORRECT", None, "CORRECT"]
    assert "invalid output after one repair attempt" in rows[1]["judge_error"] and rows[1]["j"] == 0.0
    assert r["errors"] == {"answer": 0, "judge": 1} and r["metrics"]["all"]["j"] == pytest.approx(2 / 3)
    assert res["tokens"]["judge"]["calls"] == 5 and res["tokens"]["judge"]["errors"] == 1
    assert any("1 verdicts failed (counted WRONG)" in n for n in res["notes"])


def test_a_failing_answerer_is_counted_and_retried_next_run(locomo_slice: Path, tmp_path: Path) -> None:
    ds = load_dataset(str(locomo_slice))
    from hybridmem.errors import LLMError

    answerer = ScriptedChatModel([LLMError("model down")] * 40)
    judge = ScriptedChatModel([])
    cfg = EvalConfig(modes=("bm25",), embedder="hash", cache_dir=tmp_path / "cache", limit=2)
    res = run_answer_eval(ds, cfg, AnswerConfig(answerer=answerer, judge=judge, concurrency=1))
    r = res["modes"]["bm25"]
    assert r["errors"]["answer"] == 2 and r["metrics"]["all"]["j"] == 0.0 and judge.seen == []
    assert all("model down" in row["answer_error"] for row in r["answers"].values())
    assert res["tokens"]["answerer"]["errors"] == 2
    # failures are not cached: the next run asks again
    again = ScriptedChatModel([LLMError("still down")] * 40)
    run_answer_eval(ds, cfg, AnswerConfig(answerer=again, judge=judge, concurrency=1))
    assert len(again.seen) >= 2


def test_without_gold_answers_answer_eval_is_a_clear_error(tmp_path: Path) -> None:
    ds = load_dataset("demo")
    answerer, judge = models(lambda m: "{}", lambda m: "{}")
    cfg = EvalConfig(modes=("hybrid",), embedder="hash", cache_dir=tmp_path)
    with pytest.raises(ValidationError, match="LoCoMo") as e:
        run_answer_eval(ds, cfg, AnswerConfig(answerer=answerer, judge=judge))
    assert e.value.field == "dataset"


# ------------------------------------------------------------------------------ real clients, local server
def wire_model(ds: Dataset) -> Callable[[Seen], str]:
    """The local server's model: the gold answer when asked to answer, a verdict when asked to judge."""
    gold_of = {ds.queries[q]: ds.answers[q] for q in ds.queries}

    def reply(seen: Seen) -> str:
        if seen.schema_name in ("Verdict", "json") and "Gold answer:" in seen.prompt:
            return json.dumps({"reasoning": "same topic", "label": "CORRECT"})
        question = _QUESTION.findall(seen.prompt)[-1]
        first = _CHUNK.findall(seen.prompt)[0]
        return json.dumps({"answer": f"{gold_of[question]} [{first}]", "citations": [first], "found": True})

    return reply


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as s:
        yield s


_WIRE_MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-3-5-haiku-20241022", "gemini": "gemini-2.0-flash"}


@pytest.mark.parametrize("provider", list(_WIRE_MODELS))
def test_real_clients_send_the_judge_schema_and_parse_the_label(
    provider: str, locomo_slice: Path, tmp_path: Path, server: FakeLLMServer
) -> None:
    ds = load_dataset(str(locomo_slice))
    server.responder = wire_model(ds)
    model = _WIRE_MODELS[provider]
    base = server.url + ("/v1" if provider == "openai" else "")
    llm = create_chat_model(f"{provider}:{model}", base_url=base, api_key="k", retry=FAST)
    cfg = EvalConfig(modes=("bm25",), embedder="hash", cache_dir=tmp_path / "cache", limit=2)
    res = run_answer_eval(ds, cfg, AnswerConfig(answerer=llm, judge=llm, concurrency=1))
    judged = [s for s in server.requests if "Gold answer:" in s.prompt]
    assert len(judged) == 2 and all(s.provider == provider for s in judged)
    body = judged[0].body
    if provider == "openai":
        assert judged[0].schema_name == "Verdict"
        schema = body["response_format"]["json_schema"]["schema"]
    elif provider == "anthropic":
        assert judged[0].schema_name == "Verdict"
        schema = body["tools"][0]["input_schema"]
    else:
        schema = body["generationConfig"]["responseSchema"]
    assert schema["properties"]["label"]["enum"] == ["CORRECT", "WRONG"] and "reasoning" in schema["properties"]
    r = res["modes"]["bm25"]
    assert [row["label"] for row in r["answers"].values()] == ["CORRECT", "CORRECT"]
    assert r["metrics"]["all"]["j"] == 1.0
    j = res["tokens"]["judge"]
    assert (j["calls"], j["prompt_tokens"], j["completion_tokens"]) == (2, 22, 14)  # the wire's usage (11, 7) each
    priced_as, (p_in, p_out) = price_for(f"{provider}:{model}", PRICES) or ("", (0.0, 0.0))
    assert priced_as and j["cost_usd"] == pytest.approx((22 * p_in + 14 * p_out) / 1e6)


# ------------------------------------------------------------------------------ the CLI
def _cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hybridmem.cli", "eval", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )


def test_cli_answer_options_are_validated(locomo_slice: Path, tmp_path: Path) -> None:
    for args, needle in (
        (["--answer", "--judge", "openai:m"], "--answer needs --llm"),
        (["--answer", "--llm", "openai:m"], "--answer needs --judge"),
        (["--answer", "--llm", "openai:m", "--judge", "none"], "--answer needs --judge"),
        (["--judge", "openai:m"], "--judge only applies with --answer"),
    ):
        r = _cli(str(locomo_slice), *args, cwd=tmp_path)
        assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
    env = {"HYBRIDMEM_LLM_BASE_URL": "http://127.0.0.1:9/v1"}  # never reached: every run below is refused first
    answer = ["--answer", "--llm", "openai:m", "--judge", "openai:m", "--embedder", "hash"]
    for dataset, extra, needle in (
        ("demo", [], "needs a LoCoMo JSON file"),
        (str(locomo_slice), ["--modes", "hybrid,graph"], "mode graph is not supported with --answer"),
        (str(locomo_slice), ["--prices", str(tmp_path / "none.json")], "prices: cannot read"),
    ):
        r = _cli(dataset, *answer, *extra, "--cache-dir", str(tmp_path / "c"), cwd=tmp_path, env=env)
        assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr, (extra, r.stderr)
    assert not (tmp_path / "c").exists()  # refused before any index was built


def test_cli_answer_run_with_a_local_openai_compatible_server(
    locomo_slice: Path, tmp_path: Path, server: FakeLLMServer
) -> None:
    ds = load_dataset(str(locomo_slice))
    server.responder = wire_model(ds)
    env = {"HYBRIDMEM_LLM_BASE_URL": f"{server.url}/v1"}
    args = [str(locomo_slice), "--answer", "--llm", "openai:gpt-4o-mini", "--judge", "openai:gpt-4o-mini"]
    args += ["--limit", "3", "--modes", "bm25,hybrid", "--embedder", "hash", "--cache-dir", str(tmp_path / "c")]
    r = _cli(*args, "--out", str(tmp_path / "out"), cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert "J (share CORRECT)" in r.stdout and "bm25 vs hybrid, J" in r.stdout
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert set(data["modes"]) == {"bm25", "hybrid"} and data["modes"]["hybrid"]["metrics"]["all"]["j"] == 1.0
    assert data["tokens"]["calls"] == len(server.requests) > 0
    assert "## Tokens and cost" in (tmp_path / "out" / "report.md").read_text()
    before = len(server.requests)
    r = _cli(*args, "--json", "--out", str(tmp_path / "out2"), cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    js = json.loads(r.stdout)
    assert js["tokens"]["calls"] == 0 and len(server.requests) == before and "answers" not in js["modes"]["bm25"]


def test_adversarial_questions_are_left_out_unless_asked_then_judged_against_not_mentioned(
    locomo_slice: Path, tmp_path: Path
) -> None:
    ds = load_dataset(str(locomo_slice))
    adversarial = [q for q in ds.queries if ds.categories[q] == "adversarial"]
    assert adversarial and all(ds.answers[q] == "" for q in adversarial)
    golds: list[str] = []

    def judge(messages: list[Any]) -> str:
        golds.append(_GOLD.findall(messages[-1]["content"])[-1])
        return json.dumps({"reasoning": "r", "label": "WRONG"})

    answerer = ScriptedChatModel([scripted_answerer(ds, set(), [])] * 10)
    cfg = EvalConfig(modes=("bm25",), embedder="hash", cache_dir=tmp_path / "cache")
    only = ds.subset(adversarial[:2], ds.split)  # a set of adversarial questions only
    judge_model = ScriptedChatModel([judge] * 10)
    with pytest.raises(ValidationError, match="2 adversarial question.*left out.*--adversarial"):
        run_answer_eval(only, cfg, AnswerConfig(answerer=answerer, judge=judge_model, concurrency=1))
    assert not golds
    acfg = AnswerConfig(answerer=answerer, judge=judge_model, adversarial=True, concurrency=1)
    res = run_answer_eval(only, cfg, acfg)
    assert res["dataset"]["categories"] == {"all": 2, "adversarial": 2} and res["dataset"]["adversarial_left_out"] == 0
    assert golds[-2:] == ["Not mentioned in the conversation"] * 2
    assert any("adversarial questions included" in n for n in res["notes"])
