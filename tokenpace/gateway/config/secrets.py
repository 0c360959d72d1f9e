"""The secrets the gateway itself holds, and the upstream keys it reads from outside argv.

- ``upstream_key``: an upstream's ``key_env=VAR`` / ``key_file=PATH`` option as a Bearer header
  value, so no key has to sit in the URL (where ``ps`` shows it).
- ``known_secrets``: every key and password the gateway was given, in each form it may come back
  in (an upstream echoing the decoded Basic credentials in an error): scrubbed by value from what
  is recorded, beyond the pattern-based scrubbing (core.credentials.scrub_secrets).
- ``request_secrets``: the same for the credentials one request carried (``Authorization``'s token
  with or without its scheme, ``x-api-key``, ``api-key``, a key in the query or URL user info):
  forwarded upstream, so an upstream may echo them; scrubbed by value from that request's record.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Iterable, Mapping
from urllib.parse import parse_qsl, unquote

from tokenpace.adapters.bounded_read import FileBoundError, read_text

MAX_KEY_FILE_BYTES = 1024 * 1024  # a file of keys (--client-key-file, key_file=): ~10,000 keys


def key_lines(text: str) -> list[str]:
    """One key per line; blank lines and lines starting with # are skipped."""
    return [s for line in text.splitlines() if (s := line.strip()) and not s.startswith("#")]


def read_key_file(path: str) -> list[str]:
    """The keys of a file, read within ``MAX_KEY_FILE_BYTES`` (OSError, FileBoundError: a ValueError)."""
    return key_lines(read_text(path, MAX_KEY_FILE_BYTES, "a key file"))


def upstream_key(options: dict[str, str], shown: str) -> str | None:
    """``Bearer KEY`` from ``key_env=VAR`` or ``key_file=PATH`` (the first key line), else None."""
    if "key_env" in options and "key_file" in options:
        raise ValueError(f"{shown!r}: give key_env= or key_file=, not both")
    if "key_env" in options:
        name = options["key_env"]
        key = os.environ.get(name, "").strip()
        if not key:
            raise ValueError(f"{shown!r}: environment variable {name} is not set")
        return f"Bearer {key}"
    if "key_file" in options:
        path = options["key_file"]
        try:
            keys = key_lines(read_text(path, MAX_KEY_FILE_BYTES, "a key file"))
        except OSError as exc:
            raise ValueError(f"{shown!r}: cannot read {path}: {exc.strerror}") from None
        except FileBoundError as exc:
            raise ValueError(f"{shown!r}: {exc}") from None
        if not keys:
            raise ValueError(f"{shown!r}: {path} holds no key")
        return f"Bearer {keys[0]}"
    return None


def known_secrets(keys: Iterable[str], auth_values: Iterable[str | None]) -> tuple[str, ...]:
    """Each key, and for each Authorization value: itself, its token, and for Basic the decoded
    ``user:password`` and password."""
    out = {k for k in keys if k}
    for value in auth_values:
        if not value:
            continue
        scheme, _, token = value.partition(" ")
        out.update((value, token))
        if scheme.lower() == "basic":
            try:
                decoded = base64.b64decode(token, validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                continue
            out.update((decoded, decoded.partition(":")[2]))
    return tuple(s for s in out if s)


CREDENTIAL_HEADERS = ("x-api-key", "api-key", "x-goog-api-key")  # key values, no scheme
AUTH_HEADERS = ("authorization", "proxy-authorization")  # a scheme and a token, or a bare token
_QUERY_KEYS = frozenset({"key", "api-key", "api_key", "apikey", "access_token", "token"})


def request_secrets(headers: Mapping[str, str], query: str = "", userinfo: str = "") -> tuple[str, ...]:
    """Every credential a request carried, in each form an upstream may echo it: ``headers`` (looked
    up case-insensitively by the caller's mapping), the raw ``query`` string and URL ``userinfo``."""
    keys = [v for h in CREDENTIAL_HEADERS if (v := headers.get(h))]
    auth = [v for h in AUTH_HEADERS if (v := headers.get(h))]
    if query:
        keys += [v for k, v in parse_qsl(query[:8192], keep_blank_values=False) if k.lower() in _QUERY_KEYS]
    if userinfo:
        user, _, password = unquote(userinfo).partition(":")
        keys += [password, f"{user}:{password}"] if password else [user]
    if not keys and not auth:
        return ()
    # the token, not "Scheme token": what is kept then reads "Bearer ***", the scheme still shown
    return tuple(v for v in known_secrets(keys, auth) if v not in auth or " " not in v)
