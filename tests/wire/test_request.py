"""The one request-head builder."""

from tokenpace.wire.request import request_bytes, request_head


def test_a_post_says_its_length_even_when_empty_and_a_get_says_none() -> None:
    head = request_head("POST", "/v1/chat/completions?a=1", "h:8000", [("X-A", "1")])
    assert head == b"POST /v1/chat/completions?a=1 HTTP/1.1\r\nHost: h:8000\r\nX-A: 1\r\n"
    assert request_bytes(head, b"{}").endswith(b"X-A: 1\r\nContent-Length: 2\r\n\r\n{}")
    assert request_bytes(head, b"").endswith(b"Content-Length: 0\r\n\r\n")
    get = request_bytes(request_head("GET", "/v1/models", "h", []), None)
    assert get == b"GET /v1/models HTTP/1.1\r\nHost: h\r\n\r\n"
