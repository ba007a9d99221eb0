"""The explorer at scale (issue 44): a 100k-chunk store behind the real server, Debian's chromium
driven by Playwright.

    python -m bench ui_explorer [--n 100000] [--queries 50]

Measured: the first view (navigation to the search page until its form is drawn and the store's
stats answered), and a search round trip in the browser (a query typed, Enter, until its results
are drawn), p50/p95; beside them, in the same process, the same queries over HTTP without a
browser (POST /v1/query) and through ``Memory.search`` in the server's process (the baseline the
ratios are taken against). The ``hash`` embedder, so embedding is not what is timed (targets: first
view <= 1 s, search round trip p50 <= 100 ms excluding embedding). The store is built once and
cached in ``.bench-cache/``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from pathlib import Path
from urllib.parse import quote

import httpx

from bench._common import browser_bench, iter_corpus, make_queries, pct, write_report
from hybridmem import Memory

OUT = Path("bench/results/ui-explorer.json")
CACHE = Path(".bench-cache")


def _store(n: int) -> Path:
    """The store of ``n`` synthetic chunks, built in a folder beside and renamed when whole."""
    final = CACHE / f"ui-explorer-{n}"
    if (final / "memory.db").exists():
        return final / "memory.db"
    tmp = CACHE / f".ui-explorer-{n}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with Memory(tmp / "memory.db", embedder="hash") as m:
        batch: list[dict] = []
        for doc in iter_corpus(n):
            batch.append(doc)
            if len(batch) == 5000:
                m.add_documents(batch)
                batch = []
        if batch:
            m.add_documents(batch)
        m.wait_for_vectors()
    tmp.rename(final)
    return final / "memory.db"


def _ms(xs: list[float]) -> dict[str, float]:
    """p50 / p95 / mean in ms, and how many (the explorer benchmarks' summary)."""
    return {
        "n": len(xs),
        "p50": round(pct(xs, 50), 2),
        "p95": round(pct(xs, 95), 2),
        "mean": round(statistics.mean(xs), 2),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    sync_playwright, LiveServer, chromium = browser_bench()
    t0 = time.perf_counter()
    path = _store(a.n)
    build_s = time.perf_counter() - t0
    queries = make_queries(a.queries)
    mem = Memory(path, embedder="hash")
    first, browser_search, http_search, direct = [], [], [], []
    with LiveServer(mem) as s, sync_playwright() as p, httpx.Client() as client:
        for q in queries[:5]:  # warm: indexes loaded, caches filled
            mem.search(q)
        b = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = b.new_page()
        page.goto(f"{s.url}/ui/search?q={quote(queries[0])}")
        page.locator("#results").wait_for()
        for _ in range(10):  # a fresh load: the page, its assets, the store's stats, the form drawn
            t = time.perf_counter()
            with page.expect_response(lambda r: "/v1/stats" in r.url):
                page.goto(s.url + "/ui/search", wait_until="domcontentloaded")
            page.locator("#q").wait_for()
            first.append((time.perf_counter() - t) * 1000)
        for q in queries:  # a search in the page: the query typed, Enter, the results drawn
            page.evaluate("document.querySelector('#results')?.setAttribute('data-old', '')")
            page.fill("#q", q)
            t = time.perf_counter()
            page.press("#q", "Enter")
            page.locator("#results:not([data-old]), #error:not([hidden])").first.wait_for()
            browser_search.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            r = client.post(s.url + "/v1/query", json={"search_text": q, "top_k": 10})
            http_search.append((time.perf_counter() - t) * 1000)
            assert r.status_code == 200, r.text
            t = time.perf_counter()
            mem.search({"search_text": q, "top_k": 10})
            direct.append((time.perf_counter() - t) * 1000)
        b.close()
    mem.close()
    report = {
        "chunks": a.n,
        "queries": len(queries),
        "store_build_s": round(build_s, 1),
        "first_view_ms": _ms(first),
        "browser_search_round_trip_ms": _ms(browser_search),
        "http_query_ms": _ms(http_search),
        "memory_search_ms": _ms(direct),
        "ratio_browser_vs_memory_p50": round(pct(browser_search, 50) / pct(direct, 50), 2),
        "targets": {"first_view_ms": 1000, "browser_search_round_trip_p50_ms": 100},
    }
    write_report(a.out, report)
    print(report)


if __name__ == "__main__":
    main()
