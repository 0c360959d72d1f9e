"""A fleet's stored configuration (fleet_config.py): the live settings round-trip through JSON
without any credential; a replica keeps its own key for an upstream of the same name and URL only;
a document this version cannot read is refused with the reason, never half applied."""

from __future__ import annotations

import dataclasses

import orjson
import pytest

from tokenpace.core.metrics import Slo
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.experiments.mirror import parse_mirror
from tokenpace.gateway.lifecycle.fleet_config import config_from, desired_of


def _config(**kw: object) -> GatewayConfig:
    ups = (
        parse_upstream("a=http://user:secret@10.0.0.1:8000/v1,weight=90,version=v1"),
        parse_upstream("b=http://10.0.0.2:8000/v1,weight=10,ramp=30s,model=m"),
    )
    return GatewayConfig(upstreams=ups, port=0, **kw)  # type: ignore[arg-type]


def test_the_live_settings_round_trip_without_credentials() -> None:
    theirs = _config(
        slo=Slo(ttft_ms=500, tpot_ms=40),
        slo_objective=0.95,
        static_labels={"region": "eu"},
        mirrors=(parse_mirror("c=http://10.0.0.3:8000/v1,share=0.25"),),
        stall_timeout_s=5.0,
    )
    doc = orjson.loads(orjson.dumps(desired_of(theirs, {"b": 10.0}, "abc")))  # as the store keeps it
    assert b"secret" not in orjson.dumps(doc)
    assert doc["weights_set_live"] == {"b": 10.0} and doc["file_sha"] == "abc"
    mine = _config(max_connections=7)  # settings that are not live stay this replica's
    got = config_from(mine, doc)
    assert got.max_connections == 7
    for name in ("slo", "slo_objective", "static_labels", "stall_timeout_s", "upstreams"):
        assert getattr(got, name) == getattr(theirs, name), name
    assert [(m.name, m.share, m.upstream.url) for m in got.mirrors] == [
        ("c", 0.25, "http://10.0.0.3:8000/v1")
    ]


def test_a_key_stays_with_the_upstream_of_the_same_name_and_url() -> None:
    mine = _config()
    moved = dataclasses.replace(
        mine,
        upstreams=(dataclasses.replace(mine.upstreams[0], url="http://10.9.9.9:8000/v1"), mine.upstreams[1]),
    )
    assert config_from(mine, desired_of(mine, {}, None)).upstreams[0].auth == mine.upstreams[0].auth
    assert mine.upstreams[0].auth is not None
    assert config_from(mine, desired_of(moved, {}, None)).upstreams[0].auth is None  # not sent elsewhere


def test_an_unreadable_document_is_refused_with_its_reason() -> None:
    mine = _config()
    doc = desired_of(mine, {}, None)
    with pytest.raises(ValueError, match="version"):
        config_from(mine, {**doc, "version": 99})
    with pytest.raises(ValueError, match="malformed"):
        config_from(mine, {k: v for k, v in doc.items() if k != "slo"})
    with pytest.raises(ValueError, match="weight"):  # GatewayConfig's own check
        config_from(mine, {**doc, "upstreams": [{**u, "weight": 0} for u in doc["upstreams"]]})
