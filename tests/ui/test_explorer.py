"""The memory explorer (/ui) in a real headless Chromium (Debian's, driven by Playwright) against
the real server on loopback: search with each leg's rank, a filter, a memory and its versions
with a diff, forget, a session's timeline, keyboard-only search, stored-XSS memories inert, a
wrong key shown as an error. Skipped when no browser is installed, unless
HYBRIDMEM_REQUIRE_BROWSER=1 (CI). Screenshots go to $HYBRIDMEM_UI_SCREENSHOTS or the test's tmp."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from browser_utils import launch, needs_browser, new_page, screenshots
from hybridmem import Memory
from hybridmem.server import ServerConfig
from server_utils import LiveServer

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = needs_browser

XSS = ["<img src=x onerror=alert(1)> pager duty", "<script>alert(2)</script> pager duty"]
KEY = "sk-ui-test-key-01"


def _fill(mem: Memory) -> None:
    mem.add_documents(
        [
            {
                "id": "runbook-hel",
                "text": "HEL-4040: the gateway answers HTTP 504 when max_connections is exhausted.",
                "metadata": {"team": "infra"},
            },
            {"id": "note-db", "text": "Raise max_connections on the primary database.", "metadata": {"team": "data"}},
            {"id": "xss-img", "text": XSS[0], "metadata": {"team": "sec"}},
            {"id": "xss-script", "text": XSS[1], "metadata": {"team": "sec"}},
        ]
    )
    mem.add_messages(
        [
            {
                "role": "user",
                "name": "Caroline",
                "content": "I moved to Berlin in May.",
                "timestamp": "2023-05-20T10:00:00Z",
            },
            {"role": "assistant", "name": "Mel", "content": "Congrats on Berlin!", "timestamp": "2023-05-20T10:01:00Z"},
            {
                "role": "user",
                "name": "Caroline",
                "content": "The flat is near the river.",
                "timestamp": "2023-05-20T10:02:00Z",
            },
        ],
        session_id="s1",
        user_id="caroline",
    )


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return screenshots(tmp_path_factory)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    yield from launch()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    mem = Memory(tmp_path_factory.mktemp("ui") / "m.db", embedder="hash")
    _fill(mem)
    mem.wait_for_vectors()
    mem.graph.build()  # offline: rules and extractive summaries
    with LiveServer(mem) as s:
        yield s
    mem.close()


def _page(browser: Browser, dialogs: list[str]) -> Page:
    return new_page(browser, dialogs)


def test_page_headers_and_assets(server: LiveServer) -> None:
    r = httpx.get(server.url + "/ui/search?q=x")
    csp = r.headers["content-security-policy"]
    assert r.status_code == 200 and "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert "frame-ancestors 'none'" in csp and '<script type="module" src="/ui/assets/app.js">' in r.text
    assert httpx.get(server.url + "/ui/assets/app.js").headers["content-type"].startswith("text/javascript")
    assert httpx.get(server.url + "/ui/assets/routes_ui.py").status_code == 404


def test_search_shows_each_legs_rank_and_filter(browser: Browser, server: LiveServer, shots: Path) -> None:
    dialogs: list[str] = []
    page = _page(browser, dialogs)
    page.goto(server.url + "/ui/search?q=HEL-4040&mode=hybrid")
    first = page.locator("#results .result").first
    first.wait_for()
    assert first.get_attribute("data-doc") == "runbook-hel"
    for leg in ("bm25", "dense", "exact"):
        assert first.locator(f'.leg[data-leg="{leg}"] .leg-rank').inner_text() == "#1"
    assert page.locator("#results mark").first.inner_text() == "HEL-4040"
    page.screenshot(path=str(shots / "search.png"), full_page=True)
    # a filter in the URL bounds every leg: the infra runbook is gone under team=data
    page.goto(server.url + '/ui/search?q=max_connections&filter={"team":"data"}')
    page.locator("#results .result").first.wait_for()
    assert page.locator("#results .result").evaluate_all("rs => rs.map(r => r.dataset.doc)") == ["note-db"]
    # reload and back keep the view
    page.reload()
    page.locator("#results .result").first.wait_for()
    page.go_back()
    page.locator("#results .result").first.wait_for()
    assert page.locator("#results .result").first.get_attribute("data-doc") == "runbook-hel"
    assert dialogs == []
    page.close()


def test_xss_memories_are_inert_text(browser: Browser, server: LiveServer, shots: Path) -> None:
    dialogs: list[str] = []
    page = _page(browser, dialogs)
    page.goto(server.url + "/ui/search?q=pager%20duty&mode=bm25")
    page.locator("#results .result").nth(1).wait_for()
    texts = page.locator("#results .result").all_inner_texts()
    assert any("<img src=x onerror=alert(1)>" in t for t in texts)
    assert any("<script>alert(2)</script>" in t for t in texts)
    assert page.locator("#results img").count() == 0 and page.locator("#results script").count() == 0
    page.goto(server.url + "/ui/memories/xss-img")
    page.locator("#chunks").wait_for()
    page.wait_for_timeout(300)
    assert dialogs == []  # no alert ran, anywhere
    page.screenshot(path=str(shots / "xss.png"), full_page=True)
    page.close()


def test_memory_versions_diff_then_forget(browser: Browser, server: LiveServer, shots: Path) -> None:
    dialogs: list[str] = []
    page = _page(browser, dialogs)
    page.goto(server.url + "/ui/search?q=HEL-4040")
    page.locator("#results .result").first.wait_for()
    page.locator('#results .result a[href="/ui/memories/runbook-hel"]').first.click()
    page.locator("#versions").wait_for()
    assert page.url.endswith("/ui/memories/runbook-hel")
    r = httpx.put(
        server.url + "/v1/memories/runbook-hel",
        json={"text": "HEL-4040: the gateway answers HTTP 503 when max_connections is exhausted."},
    )
    assert r.status_code == 200, r.text
    page.reload()
    page.locator("#versions .diff").wait_for()
    assert page.locator("#versions h2").inner_text() == "Versions (2)"
    assert "HTTP 503" in page.locator("#versions .diff .add").inner_text()
    assert "HTTP 504" in page.locator("#versions .diff .del").inner_text()
    page.screenshot(path=str(shots / "memory.png"), full_page=True)
    page.get_by_role("button", name="Forget").click()  # confirm() accepted by the dialog handler
    page.locator("#not-current").wait_for()
    assert any("Forget runbook-hel" in d for d in dialogs)
    page.goto(server.url + "/ui/search?q=HEL-4040&mode=bm25")
    page.locator("#main p, #results").first.wait_for()
    page.wait_for_timeout(300)
    assert page.locator('#results .result[data-doc="runbook-hel"]').count() == 0
    page.close()


def test_session_timeline_steps_through_turns(browser: Browser, server: LiveServer, shots: Path) -> None:
    page = _page(browser, [])
    page.goto(server.url + "/ui/conversations")
    page.get_by_role("link", name="s1").click()
    page.locator("#timeline .turn").nth(2).wait_for()
    speakers = page.locator("#timeline .speaker").all_inner_texts()
    assert speakers == ["Caroline", "Mel", "Caroline"]
    assert page.locator("#timeline .turn.here").get_attribute("data-turn") == "0"
    page.locator("#next-turn").click()
    page.wait_for_url("**turn=1")
    here = page.locator("#timeline .turn.here")
    assert here.get_attribute("data-turn") == "1" and "Congrats on Berlin!" in here.inner_text()
    page.screenshot(path=str(shots / "timeline.png"), full_page=True)
    page.close()


def test_keyboard_only_search(browser: Browser, server: LiveServer) -> None:
    page = _page(browser, [])
    page.goto(server.url + "/ui/search")
    page.locator("#q").wait_for()
    page.keyboard.type("Berlin")
    page.keyboard.press("Enter")
    page.locator("#results .result").first.wait_for()
    assert "q=Berlin" in page.url
    # Tab reaches the first result's link, Enter opens it
    link = page.locator("#results .result a").first
    href = link.get_attribute("href")
    for _ in range(40):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement && document.activeElement.getAttribute('href')") == href:
            break
    else:
        pytest.fail("Tab never reached the first result's link")
    page.keyboard.press("Enter")
    page.wait_for_url(f"**{href}")
    page.close()


def test_wrong_key_is_an_error_and_the_right_one_is_kept_per_tab(browser: Browser, tmp_path: Path) -> None:
    mem = Memory(tmp_path / "k.db", embedder="hash")
    mem.add("HEL-4040 runbook", id="r1")
    with LiveServer(mem, ServerConfig(api_keys={KEY: ("*",)})) as s:
        page = _page(browser, [])
        page.goto(s.url + "/ui/search?q=HEL-4040")
        page.locator("#key-form").wait_for()
        page.fill("#api-key", "sk-wrong-key-000")
        page.locator("#key-form button").click()
        page.locator("#error").wait_for()
        assert "401" in page.locator("#error").inner_text()
        page.locator("#key-form").wait_for()
        page.fill("#api-key", KEY)
        page.locator("#key-form button").click()
        page.locator("#results .result").first.wait_for()
        stored: Any = page.evaluate("[sessionStorage.getItem('hybridmem.apiKey'), localStorage.length]")
        assert stored == [KEY, 0]
        page.close()
    mem.close()


def test_browse_pages_and_status(browser: Browser, server: LiveServer) -> None:
    page = _page(browser, [])
    page.goto(server.url + "/ui/browse?order=id")
    page.locator("#memories tr td").first.wait_for()
    ids = page.locator("#memories tr td:first-child").all_inner_texts()
    assert "note-db" in ids and ids == sorted(ids)
    page.goto(server.url + "/ui/status")
    page.locator('#status [data-stat="chunks"]').wait_for()
    assert int(page.locator('#status [data-stat="chunks"]').inner_text()) >= 4
    page.close()


def test_graph_communities_and_an_entitys_neighbourhood(browser: Browser, server: LiveServer, shots: Path) -> None:
    r = httpx.get(server.url + "/v1/graph/communities", params={"limit": 0})
    assert r.status_code == 422 and "limit" in r.text
    assert httpx.get(server.url + "/v1/graph/entities/no-such-entity-xyz").status_code == 404
    page = _page(browser, [])
    page.goto(server.url + "/ui/graph")
    page.locator("#communities .community").first.wait_for()
    first = page.locator("#communities .members a").first
    name = first.inner_text()
    first.click()
    page.locator("#neighbourhood").wait_for()
    info = httpx.get(server.url + "/v1/graph/entities/" + name).json()  # a member is an entity's key
    assert page.locator("#neighbourhood .centre-label").text_content() == info["name"]
    around = {r["target"] for r in info["relations_out"]} | {r["source"] for r in info["relations_in"]}
    assert page.locator("#neighbourhood .node").count() == min(len(around), 199) > 0
    page.screenshot(path=str(shots / "graph.png"), full_page=True)
    nxt = page.locator("#neighbourhood .node").first.get_attribute("data-entity")
    page.locator("#neighbourhood .node").first.dispatch_event("click")
    page.wait_for_function("n => document.querySelector('#neighbourhood .centre-label')?.textContent === n", arg=nxt)
    page.go_back()
    page.wait_for_function(
        "n => document.querySelector('#neighbourhood .centre-label')?.textContent === n", arg=info["name"]
    )
    page.close()


def test_time_range_bounds_the_search(browser: Browser, server: LiveServer) -> None:
    page = _page(browser, [])
    page.goto(server.url + "/ui/search?q=Berlin&mode=bm25")
    page.locator("#results .result").first.wait_for()
    assert {"s1:0", "s1:1"} <= set(page.locator("#results .result").evaluate_all("rs => rs.map(r => r.dataset.doc)"))
    page.fill("#to", "2023-05-20T10:00:30Z")  # after the first turn, before the second
    page.press("#q", "Enter")
    page.wait_for_url("**to=2023-05-20T10%3A00%3A30Z**")
    page.locator("#results").wait_for()
    assert page.locator("#results .result").evaluate_all("rs => rs.map(r => r.dataset.doc)") == ["s1:0"]
    assert '"time_range"' in page.locator("details.request pre").first.text_content()
    page.close()
