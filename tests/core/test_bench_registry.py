"""bench/registry.py lists every maintained benchmark: each entry's script exists and has a main,
every script in bench/ is registered or a helper (no benchmark run, nothing imported but the table)."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _registry():  # bench/registry.py by path: the repository root need not be on sys.path
    spec = importlib.util.spec_from_file_location("bench_registry_under_test", BENCH / "registry.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses resolve the module of their class
    spec.loader.exec_module(mod)
    return mod


def test_every_entry_is_a_script_with_a_main() -> None:
    reg = _registry()
    assert len(reg.BY_NAME) == len(reg.BENCHMARKS), "a name registered twice"
    for b in reg.BENCHMARKS:
        path = BENCH / f"{b.name}.py"
        assert path.is_file(), f"registered {b.name!r} has no {path}"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body), f"{path} has no main()"
        assert b.kind in ("benchmark", "stress", "tool"), b
        assert b.minutes and b.output and b.measures, b


def test_every_script_is_registered_or_a_helper() -> None:
    reg = _registry()
    scripts = {p.stem for p in BENCH.glob("*.py")}
    loose = scripts - set(reg.BY_NAME) - reg.HELPERS
    assert not loose, f"bench/ scripts neither registered nor helpers: {sorted(loose)}"


def test_recorded_results_exist_and_the_readme_shows_the_table() -> None:
    reg = _registry()
    for b in reg.BENCHMARKS:
        if b.result is not None:
            assert (BENCH / "results" / b.result).exists(), f"{b.name}: no bench/results/{b.result}"
    assert reg.markdown() in (BENCH / "README.md").read_text(encoding="utf-8"), (
        "bench/README.md's table is not `python -m bench --markdown`'s: paste it again"
    )
