"""The gateway's configuration file (TOML): everything the command-line flags say, in one file
(`tokenpace gateway --config FILE`; flags given beside it override it). deploy/gateway.toml is a
commented example; docs/gateway-reference.md has the schema.

Keys are the flags' long names, with `-` or `_` (`first-token-timeout = "300s"`); values are what
the flag takes (strings, numbers, booleans), a list for a repeatable flag. Three take tables too:

    [[upstream]]                     # = --upstream prod=http://10.0.0.5:8000/v1,weight=95,model=m
    name = "prod"
    url = "http://10.0.0.5:8000/v1"
    weight = 95
    model = "m"

    [[mirror]]                       # = --mirror cand=http://10.0.0.6:8000/v1,share=0.1
    name = "cand"
    url = "http://10.0.0.6:8000/v1"
    share = 0.1

    [label]                          # = --label region=eu-west-1 --label tier=gold
    region = "eu-west-1"

Every key is checked against the flags, every value against its flag's type, before anything runs:
an unknown key, a wrong type or a table missing its name or url is an error naming the key; all
errors are reported at once (`--check-config FILE`: one line each, exit 2). The file is read with a
size bound (MAX_CONFIG_BYTES) and must be UTF-8.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenpace.adapters.toml_text import TomlError, loads

MAX_CONFIG_BYTES = 1 << 20  # a gateway's configuration is a page, not a data set
TABLE_KEYS = {  # a table's keys, in the order the flag's NAME=URL,k=v text takes them
    "upstream": ("name", "url", "weight", "model", "arm", "ramp", "version", "region", "metrics",
                 "key_env", "key_file", "gpu_metrics"),
    "mirror": ("name", "url", "share"),
}  # fmt: skip


class ConfigFileError(ValueError):
    """The file cannot be used; `errors` has one line per problem."""

    def __init__(self, path: str, errors: list[str]) -> None:
        super().__init__(f"{path}: " + "; ".join(errors))
        self.errors = [f"{path}: {e}" for e in errors]


@dataclass(frozen=True, slots=True)
class Flag:
    """What the command accepts for one key: its parameter name, and how."""

    param: str  # the click parameter's name (`upstreams`, `slo_text`, ...)
    multiple: bool
    is_flag: bool
    kind: type  # str, int, float (bool for flags)


def read_config_file(path: str) -> dict[str, Any]:
    """The TOML document; ConfigFileError naming the file on anything unreadable."""
    try:
        with Path(path).open("rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as e:
        raise ConfigFileError(path, [f"cannot read it ({e.strerror or e})"]) from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigFileError(path, [f"larger than {MAX_CONFIG_BYTES >> 20} MiB: not a configuration"])
    try:
        doc = loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigFileError(path, ["not UTF-8 text"]) from None
    except TomlError as e:
        raise ConfigFileError(path, [str(e).replace("not valid TOML", "not TOML")]) from None
    return doc


def to_defaults(path: str, doc: Mapping[str, Any], flags: Mapping[str, Flag]) -> dict[str, Any]:
    """The click default map the document says (parameter name -> value), or ConfigFileError with
    every problem at once. `flags`: the command's long flag names (without dashes) -> Flag."""
    out: dict[str, Any] = {}
    errors: list[str] = []
    for key, value in doc.items():
        name = key.replace("_", "-")
        flag = flags.get(name)
        if flag is None:
            errors.append(
                f"unknown key {key!r} (the keys are the flags' names: see tokenpace gateway --help)"
            )
            continue
        try:
            out[flag.param] = _value(name, value, flag)
        except ValueError as e:
            errors.append(str(e))
    if errors:
        raise ConfigFileError(path, errors)
    return out


def _value(name: str, value: Any, flag: Flag) -> Any:
    if name == "label" and isinstance(value, dict):
        value = [f"{k}={_scalar(name, v)}" for k, v in value.items()]
    if name in TABLE_KEYS:
        items = value if isinstance(value, list) else [value]
        return tuple(
            _table_text(name, item) if isinstance(item, dict) else _scalar(name, item) for item in items
        )
    if flag.multiple:
        items = value if isinstance(value, list) else [value]
        return tuple(_scalar(name, v) for v in items)
    if isinstance(value, (list, dict)):
        raise ValueError(
            f"{name}: one value expected, got a {'list' if isinstance(value, list) else 'table'}"
        )
    if flag.is_flag:
        if not isinstance(value, bool):
            raise ValueError(f"{name}: true or false expected, got {value!r}")
        return value
    if flag.kind in (int, float) and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise ValueError(f"{name}: a number expected, got {value!r}")
    if flag.kind is int and isinstance(value, float):
        raise ValueError(f"{name}: a whole number expected, got {value!r}")
    if flag.kind is float:  # as the flag would take it: a live reload's config is the start's
        try:
            return float(value)
        except OverflowError:  # an integer of hundreds of digits
            raise ValueError(
                f"{name}: a number expected, got an integer of {len(str(value))} digits"
            ) from None
    return value if flag.kind is int else _scalar(name, value)


def _scalar(name: str, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"{name}: a string or number expected, got {type(value).__name__}")
    return str(value)


def _table_text(name: str, table: Mapping[str, Any]) -> str:
    """A [[upstream]] or [[mirror]] table as the flag's NAME=URL,k=v text."""
    keys = TABLE_KEYS[name]
    unknown = [k for k in table if k not in keys]
    if unknown:
        raise ValueError(
            f"[[{name}]]: unknown key(s) {', '.join(map(repr, unknown))}; keys: {', '.join(keys)}"
        )
    if "name" not in table or "url" not in table:
        raise ValueError(f"[[{name}]]: needs name and url")
    values = {k: _scalar(name, v) for k, v in table.items()}
    if any("," in v for v in values.values()):  # the flag's text splits on commas: no key smuggled in
        raise ValueError(f"[[{name}]] {values['name']!r}: a value holds a comma")
    return ",".join(
        [f"{values['name']}={values['url']}", *(f"{k}={values[k]}" for k in keys[2:] if k in values)]
    )
