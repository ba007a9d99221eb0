"""The CLI starts fast because it imports little: checked structurally (which modules a fresh
interpreter loads), never by timing (bench/cli_startup.py times it). Also the help texts, the
plain progress lines, and the offline /docs of the HTTP server."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import time

import httpx
import pytest
from typer.core import TyperCommand
from typer.testing import CliRunner

#: what a command's start-up must not pay for (each is loaded by the command that needs it)
HEAVY = (
    "numpy",
    "pydantic",
    "pydantic_core",
    "rich",
    "matplotlib",
    "networkx",
    "fastapi",
    "uvicorn",
    "httpx",
    "mcp",
    "hybridmem.memory",
    "hybridmem.models",
    "hybridmem.store",
    "hybridmem.retrieve",
    "hybridmem.embed",
    "hybridmem.ingest",
    "hybridmem.server",
)


def _loaded(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code`` (which may exit)."""
    script = (
        "import sys, json\n"
        "try:\n" + "".join(f"    {line}\n" for line in code.splitlines()) + "except SystemExit:\n    pass\n"
        "sys.stderr.write('\\nMODULES ' + json.dumps(sorted(sys.modules)) + '\\n')\n"
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    line = next(x for x in r.stderr.splitlines() if x.startswith("MODULES "))
    return set(json.loads(line.removeprefix("MODULES ")))


def _heavy(mods: set[str]) -> list[str]:
    return sorted(m for m in mods if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_importing_the_cli_loads_nothing_heavy() -> None:
    mods = _loaded("import hybridmem.cli.root")
    assert _heavy(mods) == []
    # no command module either: they load when their command runs
    assert not {m for m in mods if m.startswith("hybridmem.cli.")} - {"hybridmem.cli.root", "hybridmem.cli.common"}


def test_import_hybridmem_is_lazy_and_complete() -> None:
    assert _heavy(_loaded("import hybridmem")) == []
    import hybridmem

    for name in hybridmem.__all__:  # every public name still resolves
        assert getattr(hybridmem, name) is not None
    from hybridmem import Memory, QueryRequest, rrf

    assert Memory.__name__ == "Memory" and QueryRequest.__name__ == "QueryRequest" and callable(rrf)
    with pytest.raises(AttributeError):
        hybridmem.no_such_name  # noqa: B018


def test_help_loads_no_command_module() -> None:
    mods = _loaded("sys.argv = ['hybridmem', '--help']\nfrom hybridmem.cli import main\nmain()")
    assert _heavy(mods) == []
    assert not {m for m in mods if m.startswith("hybridmem.cli.")} - {"hybridmem.cli.root", "hybridmem.cli.common"}


def test_search_help_loads_only_search() -> None:
    mods = _loaded("sys.argv = ['hybridmem', 'search', '--help']\nfrom hybridmem.cli import main\nmain()")
    assert "hybridmem.cli.search" in mods
    assert not {"hybridmem.cli.ingest", "hybridmem.cli.graph", "hybridmem.cli.eval_cmd", "hybridmem.cli.demo"} & mods
    # typer itself coerces option values with pydantic; the memory and its stack stay out
    assert not [m for m in _heavy(mods) if not m.startswith(("pydantic", "rich"))]


def test_root_help_lists_every_command_as_its_docstring_says() -> None:
    """The one-line help of `hybridmem --help` comes from root.COMMANDS (no module imported): it
    must stay what each command's docstring gives."""
    from hybridmem.cli.root import COMMANDS, _load

    loaded: dict[str, dict] = {}
    for name, (module, text) in COMMANDS.items():
        real = loaded.setdefault(module, _load(module))[name]
        for limit in (45, 60, 200):
            assert TyperCommand(name, help=text).get_short_help_str(limit) == real.get_short_help_str(limit), name
    r = CliRunner().invoke(__import__("hybridmem.cli.root", fromlist=["app"]).app, ["--help"])
    assert r.exit_code == 0
    assert [line.split()[0] for line in r.output.split("Commands:")[1].strip().splitlines()] == list(COMMANDS)


def _all_helps() -> list[list[str]]:
    from hybridmem.cli.root import COMMANDS

    helps = [["--help"], *([name, "--help"] for name in COMMANDS)]
    from hybridmem.cli.graph import graph_app

    helps += [["graph", c.name or "", "--help"] for c in graph_app.registered_commands]
    return helps


@pytest.mark.parametrize("args", _all_helps(), ids=lambda a: " ".join(a[:-1]) or "root")
def test_help_shows_meaningful_metavars(args: list[str]) -> None:
    from hybridmem.cli.root import app

    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    # Typer's type labels: <str>, <int>, <float>, <path>, <list[str]>… (a help text may say <split>)
    assert not re.search(r"<(?:str|int|float|bool|path|datetime|list\[[\w|]+\])>", r.output), r.output


def test_help_metavars_name_the_value() -> None:
    from hybridmem.cli.root import app

    out = CliRunner().invoke(app, ["search", "--help"]).output
    assert "--filter KEY=VALUE" in out and "--request PATH" in out and "[TEXT]" in out
    assert "--db PATH|URL" in CliRunner().invoke(app, ["--help"]).output
    out = CliRunner().invoke(app, ["delete", "--help"]).output
    assert "IDS" in out and "<list" not in out


def test_unknown_command_suggests_a_lazy_one() -> None:
    from hybridmem.cli.root import app

    r = CliRunner().invoke(app, ["serch", "x"])
    assert r.exit_code == 2 and "Did you mean 'search'" in r.output


# ------------------------------------------------------------------------------- progress


def test_plain_progress_prints_periodic_lines() -> None:
    from hybridmem.cli.common import PlainProgress

    buf = io.StringIO()
    with PlainProgress(interval=0.05, stream=buf) as prog:
        task = prog.add_task("embedding", total=4)
        other = prog.add_task("copying", total=None)
        prog.advance(task, 1)
        time.sleep(0.3)  # no advance meanwhile: the ticker still says where it is
        prog.update(other, advance=7, description="copying default")
        prog.advance(task, 3)
    lines = buf.getvalue().splitlines()
    assert lines[0] == "embedding: 0/4 (0%), 0 s elapsed"
    assert sum(line.startswith("embedding: 1/4 (25%)") for line in lines) >= 2  # periodic while it runs
    assert re.fullmatch(r"embedding: 4/4 done in \d+\.\d s", lines[-2])
    assert re.fullmatch(r"copying default: 7 done in \d+\.\d s", lines[-1])


def test_progress_is_plain_when_stderr_is_not_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    from hybridmem.cli import common

    monkeypatch.setattr(common, "err", common._LazyConsole(common._err))
    monkeypatch.setenv("TTY_COMPATIBLE", "0")
    assert isinstance(common.progress(), common.PlainProgress)
    monkeypatch.setattr(common, "err", common._LazyConsole(common._err))
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    assert type(common.progress()).__name__ == "Progress"  # rich's live bars on a terminal


# ------------------------------------------------------------------------------- offline /docs


@pytest.mark.parametrize(("page", "assets"), [("/docs", 3), ("/redoc", 2)])
def test_docs_pages_load_only_local_assets(tmp_path, page: str, assets: int) -> None:
    """/docs and /redoc work with no network: every script, style and icon the page loads is a
    local URL of the server, and it serves each of them."""
    from hybridmem import Memory
    from server_utils import LiveServer

    with Memory(tmp_path / "m.db", embedder="hash", auto_embed=False) as mem, LiveServer(mem) as srv:
        with srv.client() as c:
            html = c.get(page)
            assert html.status_code == 200 and html.headers["content-type"].startswith("text/html")
            urls = re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)["']""", html.text)
            assert len(urls) == assets, urls
            assert not re.search(r"https?://", html.text), "the page names an outside URL"
            for url in urls:
                assert url.startswith("/docs/assets/"), url
                r = c.get(url)
                assert r.status_code == 200, url
                if url.endswith(".js"):
                    assert "javascript" in r.headers["content-type"] and len(r.content) > 100_000
                    assert r.text.lstrip().startswith(("/*", "!function", "(function"))
            assert c.get("/openapi.json").json()["info"]["title"] == "hybridmem"
            missing = c.get("/docs/assets/nope.js")
            assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found"


def test_docs_assets_need_no_api_key(tmp_path) -> None:
    from hybridmem import Memory
    from hybridmem.server.config import ServerConfig
    from server_utils import LiveServer

    cfg = ServerConfig(api_keys={"sk-docs-test": ("default",)})
    with Memory(tmp_path / "m.db", embedder="hash", auto_embed=False) as mem, LiveServer(mem, cfg) as srv:
        assert httpx.get(srv.url + "/docs/assets/swagger-ui-bundle.js", timeout=30).status_code == 200
        assert httpx.post(srv.url + "/v1/query", json={"search_text": "x"}, timeout=30).status_code == 401
