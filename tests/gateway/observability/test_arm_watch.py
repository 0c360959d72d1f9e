"""The guard-rail alerts of a gray release fire for the arm that runs worse than the fleet, and only
for it (promtool's rule unit tests on synthetic series, against the generated deploy/ rules)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tokenpace.gateway.observability.arm_watch import arm_alert_rules
from tokenpace.gateway.observability.rules import to_yaml

DESCRIPTION = "gray release: check `tokenpace arms --since 1h --guard ...` before widening"


def _alert(name: str, summary: str) -> dict:
    return {
        "alertname": name,
        "exp_alerts": [
            {
                "exp_labels": {"arm": "b", "severity": "ticket"},
                "exp_annotations": {"summary": summary, "description": DESCRIPTION},
            }
        ],
    }


def test_guard_rail_alerts_fire_for_the_worse_arm_only(tmp_path: Path) -> None:
    if shutil.which("promtool") is None:
        pytest.skip("promtool (Debian prometheus) not installed")
    rules = tmp_path / "rules.yml"
    rules.write_text(to_yaml({"groups": [{"name": "arms", "rules": arm_alert_rules()}]}) + "\n")
    series = [
        ('tokenpace_gateway_requests_total{arm="a",outcome="ok"}', "0+100x60"),
        ('tokenpace_gateway_requests_total{arm="b",outcome="ok"}', "0+10x60"),
        ('tokenpace_gateway_requests_total{arm="b",outcome="http_error"}', "0+2x60"),
        ('tokenpace_gateway_outcome_events_total{arm="a",event="complaint"}', "0+1x60"),
        ('tokenpace_gateway_outcome_events_total{arm="b",event="complaint"}', "0+1x60"),
    ]
    spec = {
        "rule_files": [str(rules)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in series],
                "alert_rule_test": [
                    _alert(
                        "TokenpaceArmGuardRailErrors", "arm b's error rate is over 0.5% above the fleet's"
                    ),
                    _alert(
                        "TokenpaceArmGuardRailComplaints",
                        "arm b earns 1.5x the fleet's complaints per request",
                    ),
                    {"eval_time": "45m", "alertname": "TokenpaceArmGuardRailTTFT", "exp_alerts": []},
                ],
            }
        ],
    }
    for item in spec["tests"][0]["alert_rule_test"]:  # type: ignore[index]
        item.setdefault("eval_time", "45m")
    test_file = tmp_path / "test.yml"
    test_file.write_text(to_yaml(spec) + "\n")
    result = subprocess.run(
        ["promtool", "test", "rules", str(test_file)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
