"""The evaluation harness on real data: a slice of BEIR SciFact (test and train qrels) written as a
BEIR folder, and the shipped demo set; the hash embedder keeps it fast (the integration test at the
end uses the real e5 weights)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import shared_path
from hybridmem.errors import NotFoundError, ValidationError
from hybridmem.eval.datasets import load_dataset
from hybridmem.eval.harness import CLASSIC, EvalConfig, parse_sweep, run_eval


def _qrels(path: Path) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for line in path.read_text().splitlines()[1:]:
        q, d, s = line.split("\t")
        out.setdefault(q, {})[d] = int(s)
    return out


@pytest.fixture(scope="module")
def scifact_slice(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """60 test and 60 train queries of SciFact with their relevant abstracts plus 400 others."""
    src = shared_path("data", "beir", "scifact")
    test, train = _qrels(src / "qrels" / "test.tsv"), _qrels(src / "qrels" / "train.tsv")
    test = dict(list(test.items())[:60])
    train = dict(list(train.items())[:60])
    want = {d for r in [*test.values(), *train.values()] for d in r}
    corpus = [json.loads(line) for line in open(src / "corpus.jsonl", encoding="utf-8")]
    keep = [c for c in corpus if c["_id"] in want] + [c for c in corpus if c["_id"] not in want][:400]
    queries = {q["_id"]: q for q in map(json.loads, open(src / "queries.jsonl", encoding="utf-8"))}
    root = tmp_path_factory.mktemp("scifact-slice")
    (root / "qrels").mkdir()
    (root / "corpus.jsonl").write_text("".join(json.dumps(c) + "\n" for c in keep))
    (root / "queries.jsonl").write_text("".join(json.dumps(queries[q]) + "\n" for q in [*test, *train]))
    for name, rels in (("test", test), ("train", train)):
        rows = [f"{q}\t{d}\t{s}" for q, r in rels.items() for d, s in r.items()]
        (root / "qrels" / f"{name}.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(rows) + "\n")
    # categories by claim length, to exercise per-category reporting on real queries
    cats = [f"{q}\t{'short' if len(queries[q]['text']) < 80 else 'long'}" for q in [*test, *train]]
    (root / "qrels" / "categories.tsv").write_text("query-id\tcategory\n" + "\n".join(cats) + "\n")
    return root


def test_beir_folder_loads_with_splits_and_categories(scifact_slice: Path) -> None:
    ds = load_dataset(str(scifact_slice), "test")
    assert ds.splits == ("test", "train") and len(ds.queries) == 60 and len(ds.docs) > 400
    assert set(ds.categories.values()) == {"short", "long"} and set(ds.categories) == set(ds.queries)
    assert all(d["text"] for d in ds.docs) and len(ds.fingerprint) == 64
    with pytest.raises(NotFoundError, match="no qrels for split 'dev'.*test, train"):
        load_dataset(str(scifact_slice), "dev")
    with pytest.raises(NotFoundError, match="not found"):
        load_dataset(str(scifact_slice / "nope"))


def test_every_mode_scored_skips_explained_and_numbers_consistent(scifact_slice: Path, tmp_path: Path) -> None:
    ds = load_dataset(str(scifact_slice), "test")
    cfg = EvalConfig(modes=("bm25", "vector", "hybrid", "rerank", "graph"), embedder="hash", cache_dir=tmp_path)
    res = run_eval(ds, cfg)
    modes = res["modes"]
    assert modes["rerank"]["status"] == "ok" and modes["rerank"]["rerankers"] == {"identifier": 60}
    assert any("no LLM configured" in n for n in res["notes"])
    assert any(c["a"] == "rerank" and c["b"] == "hybrid" for c in res["comparisons"])
    # the graph is built offline on the cached index; its leg alone and fused into hybrid are scored
    assert modes["graph"]["status"] == "ok" and modes["hybrid+graph"]["status"] == "ok"
    assert any(n.startswith("graph: built") for n in res["notes"])
    assert any(c["a"] == "hybrid+graph" for c in res["comparisons"])
    for m in ("bm25", "vector", "hybrid"):
        r = modes[m]
        assert r["status"] == "ok" and r["queries"] == 60 and len(r["per_query"]) == 60
        per = r["per_query"]
        for cat in ("all", "short", "long"):
            qids = [q for q in per if cat == "all" or ds.categories[q] == cat]
            assert r["metrics"][cat]["queries"] == len(qids)
            assert r["metrics"][cat]["ndcg@10"] == pytest.approx(np.mean([per[q]["ndcg@10"] for q in qids]))
        for s in per.values():
            assert 0 <= s["recall@1"] <= s["recall@5"] <= s["recall@10"] <= s["recall@100"] <= 1
        curve = r["recall_curve"]
        assert curve["recall"] == sorted(curve["recall"]) and curve["k"][-1] == 100
        assert curve["recall"][-1] == pytest.approx(r["metrics"]["all"]["recall@100"])
        assert r["latency_ms"]["p50"] > 0 and r["latency_ms"]["p95"] >= r["latency_ms"]["p50"]
    # BM25 on real SciFact claims is far above chance, whatever the embedder
    assert modes["bm25"]["metrics"]["all"]["ndcg@10"] > 0.5
    comp = [c for c in res["comparisons"] if c["best_single_leg"] and c["metric"] == "ndcg@10"]
    assert len(comp) == 1 and comp[0]["b"] == "bm25" and 0 <= comp[0]["p_randomization"] <= 1
    assert comp[0]["mean_diff"] == pytest.approx(
        modes["hybrid"]["metrics"]["all"]["ndcg@10"] - modes["bm25"]["metrics"]["all"]["ndcg@10"]
    )
    leg = next(t for t in res["targets"] if t.get("label", "").startswith("hybrid ≥ best single leg"))
    assert leg["met"] == (leg["measured"] >= leg["target"]) and (leg["met"] or "weak" in leg["why"] or leg["why"])
    assert res["targets"] and res["references"] == []  # the slice is not the published set


def test_index_cached_and_rebuilt_when_corpus_changes(scifact_slice: Path, tmp_path: Path) -> None:
    cfg = EvalConfig(modes=("bm25",), embedder="hash", cache_dir=tmp_path / "cache")
    first = run_eval(load_dataset(str(scifact_slice)), cfg)
    second = run_eval(load_dataset(str(scifact_slice)), cfg)
    assert not first["index"]["cached"] and second["index"]["cached"]
    assert first["index"]["key"] == second["index"]["key"]
    assert first["modes"]["bm25"]["per_query"] == second["modes"]["bm25"]["per_query"]
    # a leftover half-built index (interrupted run) is never taken for a cached one
    changed = tmp_path / "changed"
    os.system(f"cp -r {scifact_slice} {changed}")
    with open(changed / "corpus.jsonl", "a") as f:
        f.write(json.dumps({"_id": "extra", "title": "", "text": "an added abstract"}) + "\n")
    (tmp_path / "cache" / ".changed-deadbeef.tmp-1").mkdir()
    third = run_eval(load_dataset(str(changed)), cfg)
    assert not third["index"]["cached"] and third["index"]["key"] != first["index"]["key"]
    assert third["dataset"]["docs"] == first["dataset"]["docs"] + 1
    # vectors are added to a cached BM25-only index when a later run needs them
    fourth = run_eval(
        load_dataset(str(scifact_slice)), EvalConfig(modes=("vector",), embedder="hash", cache_dir=tmp_path / "cache")
    )
    assert fourth["index"]["cached"] and fourth["index"]["vectors"] == fourth["index"]["chunks"]


def test_sweep_tunes_on_train_and_recommends_only_a_setting_better_everywhere(
    scifact_slice: Path, tmp_path: Path
) -> None:
    ds = load_dataset(str(scifact_slice), "test")
    cfg = EvalConfig(
        modes=("hybrid",),
        embedder="hash",
        cache_dir=tmp_path,
        sweep=parse_sweep(["dense_weight=0,0.5,1", "rrf_k=10,60"]),
    )
    sw = run_eval(ds, cfg, load_split=lambda s: load_dataset(str(scifact_slice), s))["sweep"]
    assert sw["tune_split"] == "train" and sw["report_split"] == "test"
    assert sw["tune_queries"] == 60 and sw["report_queries"] == 60
    assert len(sw["grid"]) == 6 and sum(g["classic"] for g in sw["grid"]) == 1
    base = sw["baseline"]
    assert base["full_params"] == CLASSIC
    rec = sw["recommended"]
    if rec is None:
        assert sw["verdict"].startswith("classic RRF stays")
        assert not any(
            all(g["tune"][c] > base["tune"][c] for c in base["tune"]) for g in sw["grid"] if not g["classic"]
        )
    else:
        assert all(rec["tune"][c] > base["tune"][c] for c in base["tune"]) and "recommended" in sw["verdict"]
    # dense_weight 0 is BM25 + the identifier leg alone: it must differ from classic RRF with a hash embedder
    zero = next(g for g in sw["grid"] if g["params"] == {"dense_weight": 0.0, "rrf_k_constant": 60.0})
    assert zero["tune"] != base["tune"]


def test_demo_set_without_splits_tunes_on_a_dev_half(tmp_path: Path) -> None:
    ds = load_dataset("demo")
    assert ds.filters and set(ds.languages.values()) >= {"en", "fr", "de", "es", "zh"}
    cfg = EvalConfig(modes=("bm25", "hybrid"), embedder="hash", cache_dir=tmp_path, sweep=parse_sweep(["rrf_k=30,60"]))
    res = run_eval(ds, cfg)
    sw = res["sweep"]
    assert sw["tune_split"] == "dev half" and sw["tune_queries"] + sw["report_queries"] == len(ds.queries)
    assert set(sw["baseline"]["tune"]) == set(sw["baseline"]["report"])  # every category on both halves
    assert set(res["by_language"]["bm25"]) >= {"all", "en", "fr", "de", "es", "zh"}
    assert set(res["modes"]["bm25"]["metrics"]) == {"all", *ds.categories.values()}


def test_the_feedback_weight_sweeps_from_classic_rrf_without_the_leg(tmp_path: Path) -> None:
    ds = load_dataset("demo")
    cfg = EvalConfig(
        modes=("hybrid",), embedder="hash", cache_dir=tmp_path, sweep=parse_sweep(["feedback_weight=0,1.5"]), limit=8
    )
    sw = run_eval(ds, cfg)["sweep"]
    assert [g["params"] for g in sw["grid"]] == [{"feedback_weight": 0.0}, {"feedback_weight": 1.5}]
    assert sw["baseline"]["params"] == {"feedback_weight": 0.0} and CLASSIC["feedback_weight"] == 0.0
    # documents get no feedback leg: the demo's pages score the same either way
    assert sw["grid"][0]["tune"] == sw["grid"][1]["tune"]


def test_bad_settings_are_named() -> None:
    for spec, msg in (
        ("dense=1,2", "NAME one of"),
        ("rrf_k=", "at least one"),
        ("rrf_k=a,b", "numbers"),
        ("dense_weight=-1", "≥ 0"),
    ):
        with pytest.raises(ValidationError, match=msg) as e:
            parse_sweep([spec])
        assert e.value.field == "sweep"
    ds = load_dataset("demo")
    with pytest.raises(ValidationError, match="unknown mode.*colbert"):
        run_eval(ds, EvalConfig(modes=("bm25", "colbert"), embedder="hash"))
    with pytest.raises(ValidationError, match="unknown metric"):
        run_eval(ds, EvalConfig(modes=("bm25",), embedder="hash", metric="map"))


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hybridmem.cli", "eval", *args],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_cli_writes_report_json_and_charts(scifact_slice: Path, tmp_path: Path) -> None:
    r = _cli(
        str(scifact_slice),
        "--embedder",
        "hash",
        "--no-rerank",
        "--out",
        str(tmp_path / "out"),
        "--cache-dir",
        str(tmp_path / "cache"),
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert "hybrid vs best single leg" in r.stdout
    out = tmp_path / "out"
    data = json.loads((out / "results.json").read_text())
    assert set(data["modes"]) == {"bm25", "vector", "hybrid", "graph", "hybrid+graph"}  # --no-rerank drops rerank
    for png in ("metric_by_category.png", "recall_curve.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "report.md").read_text()
    assert "short" in md and "long" in md and "metric_by_category.png" in md
    r = _cli(
        str(scifact_slice),
        "--embedder",
        "hash",
        "--modes",
        "bm25",
        "--json",
        "--out",
        str(tmp_path / "o2"),
        "--cache-dir",
        str(tmp_path / "cache"),
        cwd=tmp_path,
    )
    js = json.loads(r.stdout)
    assert js["index"]["cached"] and "per_query" not in js["modes"]["bm25"]


def test_cli_errors_are_clear(tmp_path: Path) -> None:
    r = _cli(str(tmp_path / "missing"), cwd=tmp_path)
    assert r.returncode == 3 and "dataset not found" in r.stderr and "Traceback" not in r.stderr
    r = _cli("demo", "--sweep", "bogus=1", cwd=tmp_path)
    assert r.returncode == 2 and "--sweep" in r.stderr and "Traceback" not in r.stderr
    r = _cli("demo", "--modes", "bm25,nope", "--embedder", "hash", "--cache-dir", str(tmp_path / "c"), cwd=tmp_path)
    assert r.returncode == 2 and "unknown mode" in r.stderr


@pytest.mark.integration
def test_demo_eval_with_real_weights(tmp_path: Path) -> None:
    """The done-when of the evaluation issue: the demo report shows per-category MRR for bm25, vector
    and hybrid, computed with the bundled e5 model."""
    r = _cli(
        "demo",
        "--modes",
        "bm25,vector,hybrid",
        "--out",
        str(tmp_path / "out"),
        "--cache-dir",
        str(tmp_path / "cache"),
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert data["embedder"].startswith("e5:")
    cats = set(data["dataset"]["categories"]) - {"all"}
    assert cats >= {"exact_identifier", "paraphrase", "cross_language", "filtered", "multi_document"}
    mrr = {m: {c: data["modes"][m]["metrics"][c]["mrr@10"] for c in cats} for m in ("bm25", "vector", "hybrid")}
    # what hybrid exists for: exact identifiers as well as BM25, far better than vectors alone
    assert mrr["hybrid"]["exact_identifier"] >= mrr["vector"]["exact_identifier"]
    md = (tmp_path / "out" / "report.md").read_text()
    assert "MRR@10" in md and all(c in md for c in cats)
