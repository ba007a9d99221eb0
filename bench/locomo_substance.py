"""The substance leg's variants and its gate, measured in the product (docs/agent-memory.md cites it).

    python bench/locomo_substance.py --cache-dir DIR               # LoCoMo: the variants of the leg
    python bench/locomo_substance.py --cache-dir DIR --documents   # the document sets, gate lifted

LoCoMo (the eval harness's cached index, e5; the product's default request, each question in its
own conversation; nDCG@10 / Recall@10 by category), the leg at weights 0.75 and 1:
* ``indexed``: the shipped leg (distinct terms as BM25 indexed them: the turn's own and the last few
  of the turn before it);
* ``own``: the turn's own text tokenized at query time (one more tokenization of 20 texts a query).

``--documents``: PIAF, XQuAD-de/zh and HotpotQA-100 with the turn gate lifted for every step that
has it (``is_turn`` always true in this process: the feedback leg, centering and the substance leg
run on documents too), the substance leg at 0 and 1: what the gate spares documents. JSON to
``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import hybridmem.retrieve.later_legs as L  # noqa: E402
import hybridmem.retrieve.leg_table as T  # noqa: E402
from hybridmem.eval.datasets import load_dataset  # noqa: E402
from hybridmem.eval.harness import EvalConfig, open_index  # noqa: E402
from hybridmem.eval.metrics import paired_test, per_query  # noqa: E402
from hybridmem.models import LegReport  # noqa: E402
from hybridmem.text.tokenize import tokenize  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
LOCOMO = DATA / "agentmem" / "locomo" / "locomo-shared.json"
DOCUMENT_SETS = ("piaf-fr", "xquad-de", "xquad-zh", "hotpotqa-hipporag-train100")
SHIPPED = T.substance_leg  # what the leg table runs


def _own_text_leg(store: Any, namespace: str, fused: list[tuple[int, float]], k: int) -> Any:
    top = [r for r, _ in fused[:k]]
    rows = store.fetch(top, namespace)
    size = {r: len(set(tokenize(rows[r].text, "auto"))) for r in top if r in rows}
    pos = {r: i for i, r in enumerate(top)}
    ranked = sorted(top, key=lambda r: (-size.get(r, 0), pos[r]))
    return [(r, float(size.get(r, 0))) for r in ranked], LegReport(status="ok", took_ms=0.0, returned=len(ranked))


def _run(mem: Any, ds: Any, params: dict[str, Any]) -> dict[str, dict[str, float]]:
    out = {}
    for qid, text in ds.queries.items():
        req: dict[str, Any] = {"query_id": qid, "search_text": text, "top_k": 10, "mode": "hybrid"}
        req.update(ds.scopes.get(qid, {}))
        if qid in ds.filters:
            req["metadata_filter"] = ds.filters[qid]
        if params:
            req["hybrid_params"] = params
        out[qid] = per_query(list(dict.fromkeys(r.doc_id for r in mem.search(req).results)), ds.qrels[qid])
    return out


def _by_category(ds: Any, scores: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    groups: dict[str, list[dict[str, float]]] = defaultdict(list)
    for q, s in scores.items():
        groups["all"].append(s)
        if ds.categories.get(q):
            groups[ds.categories[q]].append(s)
    return {
        c: {m: round(float(np.mean([s[m] for s in v])), 4) for m in ("ndcg@10", "recall@10")} for c, v in groups.items()
    }


def locomo(cache: Path) -> dict[str, Any]:
    ds = load_dataset(str(LOCOMO))
    mem, _ = open_index(ds, EvalConfig(cache_dir=cache), True)
    results: dict[str, Any] = {"off": _by_category(ds, _run(mem, ds, {"substance_weight": 0}))}
    print("off", results["off"]["all"], flush=True)
    for name in ("indexed", "own"):
        T.substance_leg = SHIPPED if name == "indexed" else _own_text_leg
        for w in (0.75, 1.0):
            results[f"{name} {w}"] = r = _by_category(ds, _run(mem, ds, {"substance_weight": w}))
            print(f"{name} {w}", r["all"], flush=True)
    T.substance_leg = SHIPPED
    mem.close()
    return results


def documents(cache: Path) -> dict[str, Any]:
    L.is_turn = lambda row: True  # the gate lifted for every step that has it, in this process only
    out: dict[str, Any] = {}
    for name in DOCUMENT_SETS:
        ds = load_dataset(str(DATA / "beir" / name))
        mem, _ = open_index(ds, EvalConfig(cache_dir=cache), True)
        off = _run(mem, ds, {"substance_weight": 0})
        on = _run(mem, ds, {"substance_weight": 1})
        mem.close()
        q = list(off)
        a, b = [on[x]["ndcg@10"] for x in q], [off[x]["ndcg@10"] for x in q]
        test = paired_test(a, b, seed=0)
        out[name] = {"ndcg@10 without": round(float(np.mean(b)), 4), "ndcg@10 with": round(float(np.mean(a)), 4)}
        out[name]["p"] = test["p_randomization"]
        print(name, out[name], flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache-dir", type=Path, default=ROOT / ".hybridmem" / "eval-cache")
    ap.add_argument("--documents", action="store_true")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    t = time.perf_counter()
    res = documents(a.cache_dir) if a.documents else locomo(a.cache_dir)
    res["took_s"] = round(time.perf_counter() - t, 1)
    if a.out:
        a.out.write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
