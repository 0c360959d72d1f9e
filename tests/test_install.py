"""What `pip install .` gives: the CLI on the core dependencies only; the extras stay optional.

The core list is pinned here so that a new dependency is a decision, not a side effect; the CLI is
run with every optional package blocked at import, as in a fresh install without extras."""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the 3.10 fallback the package itself uses
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

# What the CLI needs for bench, sweep, reports, the SQLite store, the gateway and the web console.
CORE = {
    "aiohttp", "httptools", "uvloop", "orjson", "numpy", "rich", "click", "sqlalchemy", "plotly",
    "prometheus-client", "tomli", "jinja2",
}  # fmt: skip
# Optional packages: the extras, and the test tools.
BLOCKED = (
    "psycopg", "tokenizers", "opentelemetry", "ray", "pytest", "hypothesis", "openai", "anthropic",
    "safetensors", "gguf", "yaml", "mypy", "ruff", "importlinter",
)  # fmt: skip

BLOCKER = f"""
import importlib.abc, sys
class Blocked(importlib.abc.MetaPathFinder):  # the blocked packages are absent, as if never installed
    def __init__(self, inner):
        self.inner = inner
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            return None
        return self.inner.find_spec(name, path, target)
    def __getattr__(self, attr):
        return getattr(self.inner, attr)
sys.meta_path[:] = [Blocked(f) for f in sys.meta_path]
"""


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower()


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENPACE_STORE": "", "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-c", BLOCKER + code, *args], capture_output=True, text=True, env=env, timeout=120
    )


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return _python(
        "import sys; sys.argv[0] = 'tokenpace'; from tokenpace.cli.main import main; main()", *args
    )


def test_core_dependencies_are_the_minimal_set() -> None:
    core = {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    assert core == CORE
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert {_name(r) for r in extras["postgres"]} == {"psycopg"}
    assert {_name(r) for r in extras["tokenizers"]} == {"tokenizers"}
    assert not core & {_name(r) for r in extras["dev"] + extras["otlp"] + extras["ray"]}


def test_every_data_file_of_the_package_is_installed() -> None:
    # pip install . (not editable) copies only the .py files and the package-data named in pyproject
    declared = {
        f"{package.replace('.', '/')}/{name}"
        for package, names in PYPROJECT["tool"]["setuptools"]["package-data"].items()
        for name in names
    }
    tracked = subprocess.run(
        ["git", "ls-files", "tokenpace"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    data = {p for p in tracked if not p.endswith(".py")}
    assert data, "git ls-files found no package files"
    missing = sorted(p for p in data if not any(fnmatch.fnmatchcase(p, pattern) for pattern in declared))
    assert not missing, f"not in [tool.setuptools.package-data]: {missing}"


def test_every_module_imports_without_the_extras() -> None:
    done = _python(
        "import importlib, pkgutil, tokenpace\n"
        "names = [m.name for m in pkgutil.walk_packages(tokenpace.__path__, 'tokenpace.')\n"
        "         if not m.name.startswith('tokenpace.testing') and not m.name.endswith('__main__')]\n"
        "for n in names: importlib.import_module(n)\n"
        "print(len(names), 'modules')\n"
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.split()[0]) > 200


def test_the_cli_says_which_extra_a_feature_needs(tmp_path: Path) -> None:
    tok = tmp_path / "tokenizer.json"
    tok.write_text("{}")
    done = _cli("bench", "--tokenizer", str(tok), "--requests", "1")
    assert done.returncode == 2, done.stderr
    assert "pip install 'tokenpace[tokenizers]'" in done.stderr
    assert "Traceback" not in done.stderr

    for flag, value, extra in (
        ("--ray", "auto", "ray"),
        ("--otlp-endpoint", "http://127.0.0.1:1/v1/traces", "otlp"),
    ):
        done = _cli("bench", flag, value, "--requests", "1", "--no-store")
        assert done.returncode == 2 and f"pip install 'tokenpace[{extra}]'" in done.stderr, done.stderr

    done = _cli("runs", "list", "--store", "postgresql://user:secret@127.0.0.1:1/db")
    assert done.returncode == 2, done.stderr
    assert "PostgreSQL stores need psycopg: pip install 'tokenpace[postgres]'" in done.stderr
    assert "secret" not in done.stderr and "Traceback" not in done.stderr


def test_the_cli_runs_without_the_extras() -> None:
    done = _cli("--help")
    assert done.returncode == 0, done.stderr
    for command in ("bench", "gateway", "sweep"):
        done = _cli(command, "--help")
        assert done.returncode == 0 and "Usage: tokenpace" in done.stdout, done.stderr


def test_make_run_installs_the_core_only_and_says_how_to_get_tokenpace_on_path(tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    venv = tmp_path / "venv"  # a venv that does not exist: make prints every step it would take
    plan = subprocess.run(
        ["make", "-n", "run", f"VENV={venv}"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    installs = [line for line in plan.splitlines() if "pip install" in line]
    assert f"{venv}/bin/pip install --quiet -e ." in installs[1], installs
    assert not any(".[" in line for line in installs), installs  # no extra: no dev, Ray or OTLP
    assert f". {venv}/bin/activate" in plan and "pipx install ." in plan
