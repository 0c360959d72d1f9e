"""Profiles as TOML files: the shipped profiles' sections (model, hardware, efficiency, engine, network)
plus, for a calibrated profile, a [provenance] table. Read with tomllib, written by hand (values are
only numbers, strings, booleans, lists of those and nested tables), so no writer dependency.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tokenpace.adapters.bounded_read import FileBoundError, read_text
from tokenpace.adapters.toml_text import TomlError, loads

MAX_PROFILE_BYTES = 1 << 20  # a profile is a few kB; refuse anything that is plainly not one


class ProfileFileError(ValueError):
    """A profile file that cannot be read (the message names the file)."""


def read_profile_file(path: str | Path) -> tuple[str, dict[str, Any]]:
    """The profile's name and its TOML document (profile.get_profile makes the Profile)."""
    p = Path(path)
    try:
        doc = loads(read_text(p, MAX_PROFILE_BYTES, "a simulator profile"))
    except FileBoundError as e:
        raise ProfileFileError(str(e)) from None
    except FileNotFoundError:
        raise ProfileFileError(f"no profile file {str(p)!r}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ProfileFileError(f"cannot read profile {str(p)!r}: {e}") from None
    except TomlError as e:
        raise ProfileFileError(f"{p}: {e}") from None
    return str(doc.get("name", p.stem)), doc


def profile_to_toml(profile: Any, header: str = "") -> str:
    """The profile as a TOML document that `load_profile_file` reads back into an equal profile."""
    top: dict[str, Any] = {
        "name": profile.name,
        "description": profile.description,
        "served_model_name": profile.served_model_name,
        "calibration": profile.calibration,
        "sources": list(profile.sources),
    }
    tables: dict[str, Any] = {
        "model": asdict(profile.model),
        "hardware": asdict(profile.hardware),
        "efficiency": asdict(profile.efficiency),
        "engine": asdict(profile.engine),
        "network": asdict(profile.network),
    }
    if profile.provenance:
        tables["provenance"] = profile.provenance
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    lines += [f"{k} = {_value(v)}" for k, v in top.items()]
    for name, table in tables.items():
        lines += _table(name, table)
    return "\n".join(lines) + "\n"


def _table(name: str, table: dict[str, Any]) -> list[str]:
    out = ["", f"[{name}]"]
    nested = []
    for k, v in table.items():
        if v is None:
            continue  # TOML has no null: an absent key reads back as the field's default
        if isinstance(v, dict):
            nested.append((k, v))
        else:
            out.append(f"{_key(k)} = {_value(v)}")
    for k, v in nested:
        out += _table(f"{name}.{_key(k)}", v)
    return out


def _key(k: str) -> str:
    return k if k.replace("_", "").replace("-", "").isalnum() else json.dumps(k)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v) if v == v and abs(v) != float("inf") else json.dumps(str(v))
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return json.dumps(str(v), ensure_ascii=False)  # JSON's string escapes are TOML's
