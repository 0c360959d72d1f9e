"""The one registry of dialects: its keys are the api label's values, paths find their dialect."""

from __future__ import annotations

import pytest

from tokenpace.client.tokenize import tokenize_url
from tokenpace.wire.dialects import APIS, DIALECTS, api_root, dialect_at, routes
from tokenpace.wire.endpoint import parse_endpoint


def test_six_apis_each_declared_once_with_a_distinct_path():
    assert APIS == ("chat", "completions", "anthropic", "responses", "embeddings", "realtime")
    paths = [cls.path for cls in DIALECTS.values()]
    assert len(set(paths)) == len(paths)
    assert all(cls.api == key for key, cls in DIALECTS.items())
    assert {d.api for d in routes("/v1").values()} == set(APIS)


@pytest.mark.parametrize(
    ("path", "method", "api"),
    [
        ("/v1/chat/completions", "POST", "chat"),  # not "completions", though it ends so
        ("/team/v1/completions/", "POST", "completions"),
        ("/v1/messages", "POST", "anthropic"),
        ("/v1/responses", "POST", "responses"),
        ("/v1/embeddings", "POST", "embeddings"),
        ("/v1/realtime", "GET", "realtime"),
        ("/v1/realtime", "POST", None),
        ("/v1/chat/completions", "GET", None),
        ("/v1/models", "GET", None),
        ("/v1/messages/count_tokens", "POST", None),
    ],
)
def test_a_request_finds_its_dialect_by_method_and_path(path: str, method: str, api: str | None):
    found = dialect_at(path, method)
    assert (found.api if found else None) == api


def test_a_url_naming_any_api_path_still_finds_models_and_tokenize():
    assert api_root("/v1/messages") == api_root("/v1/chat/completions") == api_root("/v1") == "/v1"
    url = tokenize_url(parse_endpoint("http://h:8000/v1/responses"))
    assert url == "http://h:8000/tokenize"
