"""A request is labelled by the model it asked for (issue 38, class 5): 400 junk names routed to an
upstream configured with ``model=`` were all counted under that configured model."""

from __future__ import annotations

from aiohttp.test_utils import make_mocked_request

from tokenpace.gateway.config.config import parse_upstream
from tokenpace.gateway.experiments.events import RecentRequests
from tokenpace.gateway.observability.prom import ModelLabels
from tokenpace.gateway.recording.records import RecordMaker
from tokenpace.wire.dialects import dialect_at


def test_junk_model_names_never_take_a_configured_models_label() -> None:
    upstream = parse_upstream("up=http://127.0.0.1:9/v1,model=llama")
    models = ModelLabels({"llama"}, limit=32)
    maker = RecordMaker(0, models, RecentRequests())
    dialect = dialect_at("/v1/chat/completions", "POST")
    assert dialect is not None
    request = make_mocked_request("POST", "/v1/chat/completions")
    labels = [maker(request, upstream, dialect, f"junk-{i}", None, 0).labels["model"] for i in range(400)]
    assert "llama" not in labels
    assert labels[:32] == [f"junk-{i}" for i in range(32)]  # the overflow slots, first come
    assert set(labels[32:]) == {"other"}
    assert maker(request, upstream, dialect, "llama", None, 0).labels["model"] == "llama"  # configured
    assert maker(request, upstream, dialect, None, None, 0).labels["model"] == "unknown"
