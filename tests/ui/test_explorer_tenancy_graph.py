"""The explorer in a real headless Chromium, at the edges: finding an entity by name on an
11k-entity graph (suggestions while typing, a misspelt name answered with the closest entities),
and tenant keys (a key of one namespace never sees another's memories, entities or listings in
any view; asking for another namespace is an error, not data)."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from browser_utils import launch, needs_browser, new_page, screenshots
from hybridmem import Memory
from hybridmem.server import ServerConfig
from server_utils import LiveServer

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = needs_browser

SYL = ["ka", "lo", "mi", "ren", "tor", "vas", "bel", "qui", "dra", "sen", "pol", "zar", "fen", "lu", "mor", "tis"]
KEY_A, KEY_B = "sk-tenant-a-000001", "sk-tenant-b-000002"


def _name(r: random.Random) -> str:
    word = lambda: "".join(r.choice(SYL) for _ in range(3)).capitalize()  # noqa: E731
    return f"{word()} {word()}"


def _people_docs(n: int) -> list[dict[str, str]]:
    """``n`` notes naming six people each (invented names: the rule extractor's entities)."""
    r = random.Random(7)
    docs = []
    for i in range(n):
        p = [_name(r) for _ in range(6)]
        docs.append(
            {"id": f"n{i}", "text": f"{p[0]} met {p[1]} in {p[2]}. {p[3]} works with {p[4]} on the {p[5]} project."}
        )
    return docs


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    yield from launch()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return screenshots(tmp_path_factory)


@pytest.fixture(scope="module")
def big_graph(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    mem = Memory(tmp_path_factory.mktemp("g11k") / "m.db", embedder="hash", auto_embed=False)
    mem.add_documents(_people_docs(1900))
    mem.graph.build()
    assert mem.graph.status().entities >= 11_000
    with LiveServer(mem) as s:
        yield s
    mem.close()


def test_finding_an_entity_on_an_11k_entity_graph(browser: Browser, big_graph: LiveServer, shots: Path) -> None:
    url = big_graph.url
    info = httpx.get(url + "/v1/graph/entities/" + "n0", params={"limit": 1})
    assert info.status_code == 404  # a document id is not an entity
    target = httpx.get(url + "/v1/graph/entities", params={"q": "a", "limit": 1}).json()["entities"][0]["name"]
    found = httpx.get(url + "/v1/graph/entities", params={"q": target[:7].lower(), "limit": 20}).json()
    assert found["total_entities"] >= 11_000 and target in [m["name"] for m in found["entities"]]
    assert all(m["key"].startswith(target[:7].lower()) for m in found["entities"][:3])  # prefix matches first
    typo = target[:-1] + ("x" if target[-1] != "x" else "y")
    near = httpx.get(url + "/v1/graph/entities", params={"q": typo}).json()["entities"]
    assert near and near[0]["name"] == target  # a typo still finds it
    for bad in ({"q": ""}, {"q": "a", "limit": 0}, {"q": "a", "limit": 101}):
        r = httpx.get(url + "/v1/graph/entities", params=bad)
        assert r.status_code == 422 and ("q" if "q" in bad and not bad["q"] else "limit") in r.text

    page = new_page(browser)
    page.goto(url + "/ui/graph")
    page.locator("#communities .community").first.wait_for()
    page.locator("#entity").press_sequentially(target[:6], delay=20)
    page.wait_for_function(
        "n => [...document.querySelectorAll('#entity-suggestions option')].some(o => o.value === n)", arg=target
    )
    page.goto(url + "/ui/graph?entity=" + typo)
    page.locator("#entity-matches li a").first.wait_for()
    assert page.locator("#entity-matches li a").first.inner_text() == target
    page.screenshot(path=str(shots / "graph-find.png"), full_page=True)
    page.locator("#entity-matches li a").first.click()
    page.wait_for_function("n => document.querySelector('#neighbourhood .centre-label')?.textContent === n", arg=target)
    assert page.locator("#neighbourhood .node").count() >= 5  # its five fellow people of the note
    assert re.match(r"in \d+ documents?: n\d+", page.locator("#entity-documents").inner_text())  # its notes, linked
    page.close()


@pytest.fixture(scope="module")
def tenants(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    mem = Memory(tmp_path_factory.mktemp("tenants") / "m.db", embedder="hash")
    mem.add("HEL-4040 on the gateway: team A's runbook, Orla Vantreck on call.", id="a-runbook", namespace="team-a")
    mem.add(
        "HEL-4040 on the billing side: team B's secret note, Bram Oskolov on call.", id="b-secret", namespace="team-b"
    )
    mem.add_messages(
        [{"role": "user", "name": "Bram", "content": "HEL-4040 again in team B", "timestamp": "2024-01-02T10:00:00Z"}],
        session_id="b-session",
        user_id="bram",
        namespace="team-b",
    )
    mem.wait_for_vectors()
    for ns in ("team-a", "team-b"):
        mem.graph.build(namespace=ns)
    with LiveServer(mem, ServerConfig(api_keys={KEY_A: ("team-a",), KEY_B: ("team-b",)})) as s:
        yield s
    mem.close()


def test_a_tenant_key_never_shows_another_namespace(browser: Browser, tenants: LiveServer) -> None:
    page = new_page(browser)
    page.goto(tenants.url + "/ui/search?q=HEL-4040&mode=hybrid")
    page.locator("#key-form").wait_for()
    page.fill("#api-key", KEY_A)
    page.locator("#key-form button").click()
    page.locator("#results .result").first.wait_for()
    docs = page.locator("#results .result").evaluate_all("rs => rs.map(r => r.dataset.doc)")
    assert docs == ["a-runbook"]
    assert "team B" not in page.content() and "Bram" not in page.content()

    views = ["/ui/browse?order=id", "/ui/conversations", "/ui/graph", "/ui/status", "/ui/memories/b-secret"]
    for view in views:
        page.goto(tenants.url + view)
        page.wait_for_load_state("networkidle")
        html = page.content()
        assert "secret note" not in html and "Bram" not in html and "bram" not in html, view
        assert "memories/" in view or "team-b" not in html, view  # not even the other namespace's name
    assert "404" in page.locator("#error").inner_text()  # team B's memory: not found for team A's key
    page.goto(tenants.url + "/ui/graph?entity=Bram%20Oskolov")
    page.wait_for_load_state("networkidle")
    assert "Bram" not in page.locator("main").inner_text().replace("Bram Oskolov”", "")  # only the name asked for

    page.goto(tenants.url + "/ui/search?q=HEL-4040&mode=bm25")
    page.locator("#results .result").first.wait_for()
    page.fill("#namespace", "team-b")
    page.press("#q", "Enter")
    page.locator("#error").wait_for()
    assert "403" in page.locator("#error").inner_text()
    assert "secret note" not in page.content()
    page.close()


def test_a_page_of_another_site_cannot_change_the_memory(browser: Browser, tmp_path: Path) -> None:
    """A page served from another origin (another loopback port) tries a DELETE through fetch and a
    POST through a plain form (no preflight): the browser or the server's Origin check stops both,
    and the memory is unchanged."""
    import http.server
    import threading

    mem = Memory(tmp_path / "x.db", embedder="hash", auto_embed=False)
    mem.add("HEL-4040 runbook", id="keep-me")
    with LiveServer(mem) as s:
        target = s.url
        site = tmp_path / "evil"
        site.mkdir()
        (site / "index.html").write_text(
            f"""<!doctype html><title>loading</title>
<form id="f" method="POST" action="{target}/v1/memories" enctype="text/plain">
<input name='{{"text": "planted by another site", "id": "planted", "x": "' value='"}}'></form>
<script>
fetch("{target}/v1/memories/keep-me", {{method: "DELETE"}})
  .then(r => {{ document.title = "fetch " + r.status; }})
  .catch(() => {{ document.title = "fetch blocked"; }})
  .finally(() => document.getElementById("f").submit());
</script>"""
        )
        handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=str(site))  # noqa: E731
        evil = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=evil.serve_forever, daemon=True).start()
        try:
            page = new_page(browser)
            page.goto(f"http://127.0.0.1:{evil.server_address[1]}/index.html")
            page.wait_for_url(f"{target}/v1/memories")  # the form was sent: the server answered it
            answer = page.inner_text("body")
            assert "forbidden" in answer and "origin" in answer.lower()
            page.close()
        finally:
            evil.shutdown()
        assert httpx.get(target + "/v1/memories/keep-me").status_code == 200
        assert httpx.get(target + "/v1/memories/planted").status_code == 404
    mem.close()
