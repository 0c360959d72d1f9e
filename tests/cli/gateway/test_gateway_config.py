"""`tokenpace gateway --config FILE` and `--check-config FILE`: the file says what the flags say, flags
beside it win, and a bad file is refused before anything listens, every problem on its own line.
Runs docs/gateway.md's configuration commands as written (from the repository's root)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from docs.doc_commands import doc_commands

from tokenpace.app.serving.gateway_terms import ConfigFileError, Flag, read_config_file, to_defaults
from tokenpace.testing.procs import run_cli

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "deploy" / "gateway.toml"
DOCUMENTED = [c for c in doc_commands() if c.run_elsewhere() == "tests/cli/gateway/test_gateway_config.py"]
UPSTREAM = '[[upstream]]\nname = "a"\nurl = "http://127.0.0.1:1/v1"\n'
FLAGS = {
    "listen": Flag("listen", False, False, str),
    "workers": Flag("workers", False, False, int),
    "no-store": Flag("no_store", False, True, bool),
    "event": Flag("event_names", True, False, str),
    "upstream": Flag("upstreams", True, False, str),
    "label": Flag("labels", True, False, str),
}


def test_the_documented_commands_run_as_written(tmp_path: Path) -> None:
    assert len(DOCUMENTED) == 3  # docs/gateway.md's two, README's check
    for cmd in DOCUMENTED:
        args = [a if a != "rules/" else str(tmp_path / "rules") for a in cmd.argv]
        done = run_cli(*args, cwd=str(ROOT))
        assert done.returncode == 0, (cmd.where, done.stderr)
    # the flag beside the file wins (its --slo replaces the file's slo), the rest comes from the file
    rules = (tmp_path / "rules" / "tokenpace-gateway-rules.yml").read_text()
    assert "from: {'ttft_ms': 1000.0}" in rules
    dashboard = (tmp_path / "rules" / "tokenpace-gateway-dashboard.json").read_text()
    assert '"region"' in dashboard  # the file's [label] region: a dashboard variable


def test_the_example_says_what_its_flags_would() -> None:
    defaults = to_defaults("x", {"listen": "0.0.0.0:9000", "no_store": True, "event": "a"}, FLAGS)
    assert defaults == {"listen": "0.0.0.0:9000", "no_store": True, "event_names": ("a",)}
    doc = {"upstream": [{"name": "p", "url": "http://h:1/v1", "weight": 95, "version": "v1"}],
           "label": {"region": "eu"}}  # fmt: skip
    assert to_defaults("x", doc, FLAGS) == {
        "upstreams": ("p=http://h:1/v1,weight=95,version=v1",),
        "labels": ("region=eu",),
    }
    assert read_config_file(str(EXAMPLE))["upstream"][1]["name"] == "canary"


def test_every_problem_of_a_file_is_named_at_once() -> None:
    doc = {
        "bogus": 1,
        "workers": "two",
        "no-store": "yes",
        "upstream": [{"name": "a"}, {"url": "http://h/v1"}],
    }
    with pytest.raises(ConfigFileError) as caught:
        to_defaults("f.toml", doc, FLAGS)
    errors = caught.value.errors
    assert len(errors) == 4, errors
    assert any("unknown key 'bogus'" in e for e in errors)
    assert any("workers: a number expected" in e for e in errors)
    assert any("no-store: true or false expected" in e for e in errors)
    assert any("[[upstream]]: needs name and url" in e for e in errors)
    # a value cannot smuggle another key into the flag's text
    with pytest.raises(ConfigFileError, match="holds a comma"):
        to_defaults(
            "f.toml", {"upstream": [{"name": "a", "url": "http://h/v1", "model": "m,weight=0"}]}, FLAGS
        )


UP = '[[upstream]]\nname = "a"\nurl = "http://127.0.0.1:1/v1"\n'


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('[[upstream]]\nname = "a"\nurl = "ftp://x"\n', r"a=\.\.\.: not an http\(s\) URL"),
        (
            '[[upstream]]\nname = "a"\nurl = "http://127.0.0.1:1/v1"\nweight = 0\n',
            r"every upstream's weight is 0",
        ),
        ('tea = "earl grey"\n', r"unknown key 'tea'"),
        (
            'stall-timeout = "forever"\n[[upstream]]\nname = "a"\nurl = "http://127.0.0.1:1/v1"\n',
            r"not a duration",
        ),
        ("listen = [1\n", r"not TOML"),
        ("x = " + "[" * 5000 + "]" * 5000 + "\n", r"line 1: arrays or tables nested more than 32 deep"),
        ("x = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n", r"nested more than 32 deep"),
        ("slo-objective = nan\n" + UP, r"--slo-objective must be a share between 0 and 1, not nan"),
        ("workers = 9223372036854775807\n" + UP, r"--workers must be at most 1,024"),
        ("events-rate = inf\n" + UP, r"--events-rate must be at most"),
        ("events-rate = 1" + "0" * 400 + "\n" + UP, r"events-rate: a number expected, got an integer of 401"),
        (UP + "weight = 1e308\n", r"upstream 'a': weight must be at most 1,000,000, not 1e\+308"),
        ('fleet = "' + "f" * 129 + '"\n' + UP, r"--fleet: a printable name of 1 to 128 characters"),
        ('fleet = "prod"\nno-store = true\n' + UP, r"--fleet shares the configuration through the store"),
    ],
)
def test_a_bad_file_is_refused_one_line_a_problem_exit_2(tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "gw.toml"
    path.write_text(text)
    for flag in ("--check-config", "--config"):
        done = run_cli("gateway", flag, str(path), timeout=30)
        assert done.returncode == 2, (flag, done.stdout, done.stderr)
        assert re.search(said, done.stderr) and "Traceback" not in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_two_problems_two_lines(tmp_path: Path) -> None:
    path = tmp_path / "gw.toml"
    path.write_text('listen = "nowhere"\n[[upstream]]\nname = "a"\nurl = "ftp://x"\n')
    done = run_cli("gateway", "--check-config", str(path), timeout=30)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 2, done.stderr
    assert all(line.startswith(f"tokenpace gateway: {path}: ") for line in lines)


def test_every_whole_file_problem_its_own_line(tmp_path: Path) -> None:
    """Checks of the whole configuration (ranges, label sizes) list every problem, not the first."""
    path = tmp_path / "gw.toml"
    name = "n" * 129  # a label value too long, as its name and as its arm
    text = "max-body = 9999999999999\nworkers = 5000\nslo-objective = 2\n"
    path.write_text(text + f'[[upstream]]\nname = "{name}"\nurl = "http://127.0.0.1:1/v1"\n')
    checked = run_cli("gateway", "--check-config", str(path), timeout=30)
    lines = [
        line.removeprefix(f"tokenpace gateway: {path}: ") for line in checked.stderr.strip().splitlines()
    ]
    assert checked.returncode == 2 and len(lines) == 5, checked.stderr
    assert any(line.startswith("--max-body must be at most") for line in lines), lines
    assert sum("must be at most 128 characters (a label value)" in line for line in lines) == 2, lines
    started = run_cli("gateway", "--config", str(path), timeout=30)  # a start: the same, in one line
    assert started.returncode == 2 and started.stderr.count("\n") == 1, started.stderr
    assert all(line in started.stderr for line in lines) and "Traceback" not in started.stderr
