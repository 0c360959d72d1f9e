"""Secrets on their way out: credentials in URLs, header values, and error texts that echo them.

One home for the rules the bench client and the gateway share: a URL's ``user:password`` is sent
as HTTP Basic auth and never shown; a header value with a control character is refused before
any load (it could smuggle a header in, or break every request and echo the key back); error
texts kept in records have any credential replaced by ``***``.
"""

from __future__ import annotations

import base64
import contextlib
import re
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit, urlunsplit

HIDDEN = "***"
# RFC 9110 token characters: what a header name may hold.
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # fullmatch: "$" would let a final "\n" by
# Control characters other than tab (CR, LF and NUL among them), and DEL.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_USERINFO = re.compile(r"(?<=//)[^/@\s?#]*@")
# Credentials a server may echo back: "Bearer sk-...", "Basic dXNlcjpwdw==", "api-key: ...",
# and OpenAI-style keys on their own.
_SCHEME_TOKEN = re.compile(r"(?i)\b(bearer\s+)[^\s'\",;]+|\b(basic\s+)[A-Za-z0-9+/]{8,}=*")
_KEY_HEADER = re.compile(
    r"(?i)\b((?:x-)?api[-_]?key|authorization)(['\"]?\s*[:=]\s*['\"]?)(?!bearer\b|basic\b)[^\s'\",;]+"
)
_SK_KEY = re.compile(r"\bsk-[A-Za-z0-9_-]{6,}")
_MIN_SECRET = 4  # shorter known secrets are not hunted in free text (they would match words)


def has_control(text: str) -> bool:
    """True when ``text`` holds CR, LF, NUL or another control character (tab is allowed)."""
    return _CONTROL.search(text) is not None


def header_problem(name: str, value: str) -> str | None:
    """Why this header must not be sent, or None. Never includes the value."""
    if not _TOKEN.fullmatch(name):
        return "a header name must be letters, digits and !#$%&'*+-.^_`|~ (no spaces or control characters)"
    if has_control(value):
        return f"the value of {name} holds a control character (CR, LF, NUL, ...); refused, not shown"
    return None


def split_credentials(url: str) -> tuple[str, str | None]:
    """``http://user:pw@host/v1`` -> (``http://host/v1``, ``Basic base64(user:pw)``)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None
    return _without_userinfo(url), basic_auth(unquote(parts.username or ""), unquote(parts.password or ""))


def basic_auth(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def request_headers(headers: dict[str, str], api_key: str | None, url_auth: str | None) -> dict[str, str]:
    """What to send: ``--api-key`` as Bearer; else the URL's Basic auth, unless the headers given
    already hold an Authorization."""
    out = dict(headers)
    if api_key:
        out["Authorization"] = f"Bearer {api_key}"
    elif url_auth and not any(k.lower() == "authorization" for k in out):
        out["Authorization"] = url_auth
    return out


def secrets_of(headers: dict[str, str]) -> tuple[str, ...]:
    """Every header value, and the token and password inside an Authorization, to scrub from texts."""
    found: list[str] = []
    for value in headers.values():
        found.append(value)
        scheme, _, token = value.partition(" ")
        if scheme.lower() in ("bearer", "basic") and token:
            found.append(token)
        if scheme.lower() == "basic" and token:
            with contextlib.suppress(ValueError):  # not base64 or UTF-8: the token itself will do
                found.append(base64.b64decode(token).decode().partition(":")[2])
    return tuple(found)


def strip_credentials(url: str) -> str:
    """The URL as it may be shown: without ``user:password@``."""
    return _without_userinfo(url) if "@" in url else url


def redact_userinfo(text: str) -> str:
    """Any ``//user:password@`` inside free text (e.g. a flag's value in a message) as ``//***@``."""
    return _USERINFO.sub(HIDDEN + "@", text)


def scrub_secrets(text: str | None, secrets: Iterable[str] = ()) -> str | None:
    """``text`` with credentials replaced by ``***``: the ``secrets`` given (an API key, header
    values, a URL's password) and what looks like one (Bearer/Basic tokens, api-key values,
    ``sk-...`` keys, URL user info). For error texts a server sent that are kept in records."""
    if not text:
        return text
    for secret in sorted({s for s in secrets if s and len(s) >= _MIN_SECRET}, key=len, reverse=True):
        text = text.replace(secret, HIDDEN)
    text = _SCHEME_TOKEN.sub(lambda m: (m.group(1) or m.group(2)) + HIDDEN, text)
    text = _KEY_HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{HIDDEN}", text)
    text = _SK_KEY.sub("sk-" + HIDDEN, text)
    return redact_userinfo(text)


def _without_userinfo(url: str) -> str:
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
