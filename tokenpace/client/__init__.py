"""How to send a request and time its answer: a lean HTTP/1.1 client over asyncio."""

from tokenpace.client.endpoint import Endpoint, EndpointError, parse_endpoint, tls_context
from tokenpace.client.sender import Sender

__all__ = ["Endpoint", "EndpointError", "Sender", "parse_endpoint", "tls_context"]
