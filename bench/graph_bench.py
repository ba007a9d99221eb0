"""GraphRAG measurements for docs/graphrag.md.

    python -m bench graph_bench tokens        # global map-reduce vs naive top-50 RAG prompt tokens
    python -m bench graph_bench incremental   # LLM calls (counted with the test double) of updates/deletes
    python -m bench graph_bench speed         # offline extraction chunks/s; Leiden on a 100k-edge graph
    python -m bench graph_bench hotpot        # HotpotQA recall@10: hybrid vs hybrid + graph leg (e5)
    python -m bench graph_bench demo          # demo MRR@10 with graph_weight 0 / 0.5 / 1 (e5)

Results are printed and merged into bench/results/graph.json.
"""

from __future__ import annotations

import csv
import io
import json
import random
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "graph"))  # for test_graph_llm.counting_model

from hybridmem import Memory  # noqa: E402
from hybridmem.answer import answer_messages  # noqa: E402
from hybridmem.graph.search import estimate_tokens  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
RESULTS = ROOT / "bench" / "results" / "graph.json"
CACHE = ROOT / ".bench-cache" / "embeddings.db"


def save(section: str, data: dict) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    allr = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    allr[section] = data
    RESULTS.write_text(json.dumps(allr, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps(data, indent=1, ensure_ascii=False))


def podcast_docs() -> list[dict]:
    z = zipfile.ZipFile(SHARED / "graphrag" / "podcast" / "Kevin_Scott_Podcast_Transcripts_Input_Text.zip")
    out = []
    for name in sorted(z.namelist()):
        if name.endswith(".txt"):
            out.append({"id": Path(name).stem, "text": z.read(name).decode("utf-8", "replace"), "source": name})
    return out


def podcast_questions() -> list[str]:
    raw = (SHARED / "graphrag" / "podcast" / "Kevin_Scott_Questions.csv").read_text(encoding="utf-8-sig")
    return [r["question_text"] for r in csv.DictReader(io.StringIO(raw))]


#: A Christmas Carol ships without questions: corpus-wide questions of the kind GraphRAG targets
CAROL_QUESTIONS = [
    "What are the main themes of the story?",
    "How does Scrooge change over the course of the story, and what causes the change?",
    "Which characters help Scrooge understand the consequences of his behaviour?",
    "What role do the spirits play, and how do their visits differ?",
    "How is poverty portrayed across the book?",
    "What does the Cratchit family represent?",
    "How do the other characters see Scrooge at the beginning and at the end?",
    "What is the significance of Christmas for the different characters?",
]


def tokens() -> None:
    out = {}
    sets = {
        "podcast": (podcast_docs(), podcast_questions()),
        "christmas_carol": (
            [{"id": "carol", "text": (SHARED / "graphrag" / "a_christmas_carol.txt").read_text()}],
            CAROL_QUESTIONS,
        ),
    }
    for name, (docs, questions) in sets.items():
        with tempfile.TemporaryDirectory() as d, Memory(Path(d) / "m.db", embedder="hash", auto_embed=False) as m:
            m.add_documents(docs, batch_size=256)
            t = time.perf_counter()
            rep = m.graph.build()
            build_s = time.perf_counter() - t
            naive, glob, found = [], [], 0
            for q in questions:
                resp = m.search(q, mode="bm25", top_k=50)
                naive.append(
                    estimate_tokens("".join(x["content"] for x in answer_messages(q, resp.results, max_chars=10**9)))
                )
                ans = m.ask_global(q)
                glob.append(ans.prompt_tokens)
                found += ans.found
            chunks = m.stats().chunks
            comm0 = len(m.graph.communities(level=0))
            out[name] = {
                "documents": len(docs),
                "chunks": chunks,
                "questions": len(questions),
                "entities": rep.entities,
                "communities": rep.communities,
                "level0_communities": comm0,
                "graph_build_s": round(build_s, 2),
                "naive_top50_prompt_tokens_mean": round(statistics.mean(naive)),
                "global_prompt_tokens_mean": round(statistics.mean(glob)),
                "global_prompt_tokens_max": max(glob),
                "reduction_pct": round(100 * (1 - statistics.mean(glob) / statistics.mean(naive)), 1),
                "global_answered": found,
            }
    save("tokens", out)


def synthetic_docs(n: int, seed: int = 0) -> list[dict]:
    """``n`` technical documents about services in 25 teams (clusters), each naming a few entities."""
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        team = rng.randrange(25)
        svc = f"svc{team}x{rng.randrange(12)}-service"
        other = f"svc{team}x{rng.randrange(12)}-service"
        db = f"db-{team}{rng.randrange(3)}-01"
        err = f"HEL-{1000 + team * 10 + rng.randrange(5)}"
        docs.append(
            {
                "id": f"doc-{i:04d}",
                "text": (
                    f"{svc} depends on {db}. {svc} calls {other} for every request. "
                    f"When {db} is slow, {err} provoque HTTP 50{rng.randrange(4)} on {svc}. "
                    f"Tune max_connections_{team} and pool_timeout_ms on {db}."
                ),
            }
        )
    return docs


def incremental() -> None:
    from test_graph_llm import counting_model

    llm = counting_model()
    with tempfile.TemporaryDirectory() as d, Memory(Path(d) / "m.db", embedder="hash", auto_embed=False, llm=llm) as m:
        docs = synthetic_docs(1000)
        m.add_documents(docs, batch_size=256)
        t = time.perf_counter()
        rep = m.graph.build(batch_size=1)
        full = {
            "llm_calls": rep.llm_calls,
            "chunks_extracted": rep.chunks_extracted,
            "communities": rep.communities,
            "seconds": round(time.perf_counter() - t, 2),
        }
        llm.seen.clear()
        changed = dict(docs[123])
        changed["text"] = changed["text"].replace("depends on", "no longer depends on") + " It now uses cache-77-01."
        m.update(changed["id"], changed["text"])
        stale = m.graph.status().stale_communities
        rep = m.graph.update(batch_size=1)
        one = {
            "stale_communities_before_update": stale,
            "llm_calls": len(llm.seen),
            "chunks_reextracted": rep.chunks_extracted,
            "summaries_made": rep.summaries_made,
            "summaries_reused": rep.summaries_reused,
            "calls_equal_changed_communities_plus_chunks": len(llm.seen) == rep.summaries_made + rep.chunks_extracted,
        }
        llm.seen.clear()
        m.delete([x["id"] for x in docs[500:600]])
        stale = m.graph.status().stale_communities
        rep = m.graph.update(batch_size=1)
        dele = {
            "stale_communities_before_update": stale,
            "llm_calls": len(llm.seen),
            "summaries_pruned": rep.summaries_pruned,
            "summaries_reused": rep.summaries_reused,
            "stale_after": m.graph.status().stale_communities,
        }
    save("incremental", {"documents": 1000, "full_build": full, "change_1_document": one, "delete_100_documents": dele})


def speed() -> None:
    from hybridmem.graph.communities import detect_communities
    from hybridmem.graph.extract import ChunkInput, RuleExtractor
    from hybridmem.text.chunk import chunk_text

    ext = RuleExtractor()
    res = {}
    for name, docs in (("podcast", podcast_docs()), ("demo", None)):
        if docs is None:
            from hybridmem.demo import load_documents

            docs = load_documents()
        chunks = [c for d in docs for c in chunk_text(d["text"], 1200, 150)]
        t = time.perf_counter()
        ext.extract([ChunkInput(i, str(i), c) for i, c in enumerate(chunks)])
        dt = time.perf_counter() - t
        res[f"extraction_{name}"] = {
            "chunks": len(chunks),
            "seconds": round(dt, 2),
            "chunks_per_s": round(len(chunks) / dt),
        }
    rng = random.Random(1)
    n_nodes, n_edges, n_comm = 20_000, 100_000, 400
    comm = [rng.randrange(n_comm) for _ in range(n_nodes)]
    members: dict[int, list[int]] = {}
    for v, c in enumerate(comm):
        members.setdefault(c, []).append(v)
    w: dict[tuple[int, int], float] = {}
    while len(w) < n_edges:
        a = rng.randrange(n_nodes)
        b = rng.choice(members[comm[a]]) if rng.random() < 0.8 else rng.randrange(n_nodes)
        if a != b:
            w[(min(a, b), max(a, b))] = 1.0 + rng.random()
    for mcs in (1000, 100):
        t = time.perf_counter()
        cs = detect_communities(w, max_cluster_size=mcs, max_levels=3)
        dt = time.perf_counter() - t
        res[f"leiden_100k_edges_max{mcs}"] = {
            "nodes": n_nodes,
            "edges": len(w),
            "seconds": round(dt, 2),
            "communities": len(cs),
            "levels": len({c.level for c in cs}),
        }
    save("speed", res)


def _doc_text(rec: dict) -> str:
    title = (rec.get("title") or "").strip()
    return f"{title}\n\n{rec['text']}" if title else rec["text"]


def hotpot() -> None:
    from hybridmem.embed import create_embedder
    from hybridmem.embed.cache import CachedEmbedder

    base = SHARED / "beir" / "hotpotqa-hipporag-train100"
    corpus = [json.loads(x) for x in open(base / "corpus.jsonl")]
    queries = {q["_id"]: q["text"] for q in map(json.loads, open(base / "queries.jsonl"))}
    qrels: dict[str, set[str]] = {}
    for line in list(open(base / "qrels" / "test.tsv"))[1:]:
        qid, did, score = line.rstrip("\n").split("\t")
        if int(score) > 0:
            qrels.setdefault(qid, set()).add(did)
    emb = CachedEmbedder(create_embedder("e5"), CACHE)
    res = {}
    with (
        tempfile.TemporaryDirectory() as d,
        Memory(Path(d) / "h.db", embedder=emb, chunk_size=None, auto_embed=False) as m,
    ):
        m.add_documents([{"id": r["_id"], "text": _doc_text(r)} for r in corpus], batch_size=256)
        t = time.perf_counter()
        m.wait_for_vectors()
        res["embed_s"] = round(time.perf_counter() - t, 1)
        rep = m.graph.build()
        res["graph"] = {
            "entities": rep.entities,
            "relations": rep.relations,
            "cooccurrence_edges": rep.cooccurrence_edges,
            "communities": rep.communities,
            "build_s": rep.took_s,
        }
        configs = {"bm25": {"mode": "bm25"}, "dense": {"mode": "vector"}, "hybrid": {}, "graph only": {"mode": "graph"}}
        for gw in (0.25, 0.5, 1.0):
            configs[f"hybrid + graph (w={gw})"] = {"hybrid_params": {"graph_weight": gw}}
        for name, kw in configs.items():
            recalls, full = [], 0
            t = time.perf_counter()
            for qid, gold in qrels.items():
                resp = m.search(queries[qid], top_k=10, **kw)
                got = {r.doc_id for r in resp.results}
                recalls.append(len(got & gold) / len(gold))
                full += gold <= got
            res[name] = {
                "recall@10": round(statistics.mean(recalls), 4),
                "all_supporting@10": round(full / len(qrels), 3),
                "ms_per_query": round(1000 * (time.perf_counter() - t) / len(qrels), 1),
            }
            print(name, res[name], flush=True)
    save("hotpot", res)


def demo() -> None:
    from hybridmem.demo import load_documents, load_questions
    from hybridmem.embed import create_embedder
    from hybridmem.embed.cache import CachedEmbedder

    emb = CachedEmbedder(create_embedder("e5"), CACHE)
    res = {}
    with tempfile.TemporaryDirectory() as d, Memory(Path(d) / "d.db", embedder=emb, auto_embed=False) as m:
        m.add_documents(load_documents())
        m.wait_for_vectors()
        m.graph.build()
        qs = load_questions()
        for gw in (0.0, 0.25, 0.5, 1.0):
            rr = []
            for q in qs:
                resp = m.search(
                    q["question"],
                    top_k=10,
                    metadata_filter=q.get("metadata_filter") or {},
                    hybrid_params={"graph_weight": gw},
                )
                ranked = list(dict.fromkeys(r.doc_id for r in resp.results))
                rank = next((i for i, x in enumerate(ranked, 1) if x in q["gold"]), None)
                rr.append(1 / rank if rank else 0.0)
            res[f"graph_weight={gw}"] = {"mrr@10": round(statistics.mean(rr), 3), "questions": len(qs)}
            print(gw, res[f"graph_weight={gw}"], flush=True)
    save("demo", res)


def main() -> None:
    for part in sys.argv[1:] or ["tokens", "incremental", "speed"]:
        globals()[part]()


if __name__ == "__main__":
    main()
