"""A real headless Chromium for the explorer's tests (Debian's, driven by Playwright with
``executable_path``): skipped when none is installed, unless HYBRIDMEM_REQUIRE_BROWSER=1 (CI), where
a missing browser is an error. Screenshots go to $HYBRIDMEM_UI_SCREENSHOTS or the test's tmp."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
REQUIRED = os.environ.get("HYBRIDMEM_REQUIRE_BROWSER") == "1"

try:
    from playwright.sync_api import Browser, Page, sync_playwright
except ImportError:  # pragma: no cover - the test extra installs it
    sync_playwright = None  # type: ignore[assignment]

if REQUIRED and (CHROMIUM is None or sync_playwright is None):
    raise RuntimeError("HYBRIDMEM_REQUIRE_BROWSER=1 but chromium or playwright is missing")

needs_browser = pytest.mark.skipif(
    CHROMIUM is None or sync_playwright is None, reason="no chromium (apt install chromium) or playwright"
)


def launch() -> Iterator[Browser]:
    """The browser for a module's tests (a generator for a fixture)."""
    assert sync_playwright is not None and CHROMIUM is not None
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


def screenshots(factory: pytest.TempPathFactory) -> Path:
    out = os.environ.get("HYBRIDMEM_UI_SCREENSHOTS")
    path = Path(out) if out else factory.mktemp("ui-shots")
    path.mkdir(parents=True, exist_ok=True)
    return path


def new_page(browser: Browser, dialogs: list[str] | None = None) -> Page:
    """A 1280x900 page whose dialogs (confirm) are accepted and recorded in ``dialogs``."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    seen: list[Any] = dialogs if dialogs is not None else []
    page.on("dialog", lambda d: (seen.append(d.message), d.accept()))
    return page
