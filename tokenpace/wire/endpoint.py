"""Where to send: a base URL parsed once into what the connection needs."""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from tokenpace.core.credentials import has_control, redact_userinfo, split_credentials


class EndpointError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Endpoint:
    url: str
    scheme: str
    host: str
    port: int
    base_path: str  # e.g. "/v1", no trailing slash
    host_header: str
    query: str = ""  # kept for every request, e.g. Azure's api-version=...
    # Basic auth from the URL's user:password (``url`` is shown without them): sent when the
    # caller has no Authorization of its own. Never shown.
    auth: str | None = field(default=None, repr=False)

    @property
    def tls(self) -> bool:
        return self.scheme == "https"

    def ssl_context(self) -> ssl.SSLContext | None:
        return ssl.create_default_context() if self.tls else None

    def path_for(self, dialect_path: str) -> str:
        # A URL that already names the API path (".../chat/completions") is used as it is.
        path = self.base_path if self.base_path.endswith(dialect_path) else self.base_path + dialect_path
        return f"{path}?{self.query}" if self.query else path


def tls_context(verify: bool = True, ca_cert: str | None = None) -> ssl.SSLContext:
    """Default verification, a private CA (e.g. a self-signed test endpoint), or none at all."""
    ctx = ssl.create_default_context(cafile=ca_cert)
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def parse_endpoint(url: str) -> Endpoint:
    """``url`` may hold ``user:password@``: they become ``auth`` and leave ``url``."""
    url = url.strip()
    shown = redact_userinfo(url)
    if has_control(url):
        raise EndpointError("the URL holds a control character (CR, LF, NUL, ...)")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise EndpointError(f"URL must start with http:// or https://, got {shown!r}")
    if not parts.hostname:
        raise EndpointError(f"URL has no host: {shown!r}")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise EndpointError(f"URL has a bad port: {shown!r}") from None
    url, auth = split_credentials(url)
    default_port = port == (443 if parts.scheme == "https" else 80)
    host = parts.hostname
    host_header = host if default_port else f"{host}:{port}"
    if ":" in host and not host.startswith("["):  # IPv6 literal in the Host header
        host_header = f"[{host}]" if default_port else f"[{host}]:{port}"
    return Endpoint(
        url=url,
        scheme=parts.scheme,
        host=host,
        port=port,
        base_path=parts.path.rstrip("/"),
        host_header=host_header,
        query=parts.query,
        auth=auth,
    )
