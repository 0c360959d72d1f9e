"""deploy/: the systemd unit's commands run (the config check, the gateway itself, a reload by
SIGHUP, a stop by SIGTERM), and the Kubernetes manifests parse, hold a config file that passes the
check, and point their probes, Service and ServiceMonitor at the gateway's own paths and ports."""

from __future__ import annotations

import configparser
import re
import shlex
import signal
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from tokenpace.testing.procs import free_port, run_cli, start_service, wait_listening

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
EXAMPLE = DEPLOY / "gateway.toml"


def _unit() -> configparser.SectionProxy:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys keep their case
    parser.read_string((DEPLOY / "tokenpace-gateway.service").read_text())
    return parser["Service"]


def _argv(line: str, config: Path) -> list[str]:
    """A unit's command as tokenpace's arguments, the config path replaced."""
    argv = shlex.split(line)
    assert argv[:2] == ["/usr/bin/env", "tokenpace"], line
    return [str(config) if a == "/etc/tokenpace/gateway.toml" else a for a in argv[2:]]


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_the_systemd_unit_checks_runs_reloads_and_stops_the_gateway(tmp_path: Path) -> None:
    unit = _unit()
    config = tmp_path / "gateway.toml"
    config.write_text(EXAMPLE.read_text())
    check = run_cli(*_argv(unit["ExecStartPre"], config), cwd=str(tmp_path))
    assert check.returncode == 0 and "ok" in check.stdout, check.stderr
    start = _argv(unit["ExecStart"], config)
    assert start == ["gateway", "--config", str(config)]
    assert unit["ExecReload"] == "/bin/kill -HUP $MAINPID" and unit["KillSignal"] == "SIGTERM"
    shutdown_s = float(re.search(r'shutdown-timeout = "(\d+)s"', EXAMPLE.read_text()).group(1))  # type: ignore[union-attr]
    assert float(unit["TimeoutStopSec"]) > shutdown_s
    # the unit's ExecStart, on free ports (the example's are fixed), then its reload and its stop
    port, admin = free_port(), free_port()
    ports = ["--listen", f"127.0.0.1:{port}", "--admin-listen", f"127.0.0.1:{admin}"]
    proc = start_service(*start, *ports, cwd=tmp_path)
    try:
        wait_listening(admin, proc)
        assert _get(f"http://127.0.0.1:{admin}/tokenpace/live")[0] == 200
        proc.send_signal(signal.SIGHUP)  # ExecReload: the same file, nothing to change
        assert _get(f"http://127.0.0.1:{admin}/tokenpace/live")[0] == 200 and proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "records: 0 written, 0 dropped" in err


def _docs() -> dict[str, dict[str, Any]]:
    docs = list(yaml.safe_load_all((DEPLOY / "k8s" / "gateway.yaml").read_text()))
    return {d["kind"]: d for d in docs}


def test_the_kubernetes_manifests_match_the_gateway(tmp_path: Path) -> None:
    docs = _docs()
    assert set(docs) == {"ConfigMap", "Deployment", "PodDisruptionBudget", "Service", "ServiceMonitor"}
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["config"]["configMap"]["name"] == docs["ConfigMap"]["metadata"]["name"]
    # mounted as a directory: kubelet swaps its ..data link on an update (a subPath mount never sees one)
    assert all("subPath" not in m for m in container["volumeMounts"] if m["name"] == "config")
    # the command reads the ConfigMap's file where it is mounted
    config_file = mounts["config"] + "/gateway.toml"
    assert container["command"] == [
        "tokenpace",
        "gateway",
        "--config",
        config_file,
        "--replica",
        "$(POD_NAME)",
    ]
    text = docs["ConfigMap"]["data"]["gateway.toml"]
    # a fleet: 3 replicas sharing the store from a Secret, each named by its pod, at most one down
    # at a time by a voluntary disruption; the spool on the volume that outlives a container
    deployment = docs["Deployment"]["spec"]
    labels = deployment["selector"]["matchLabels"]
    assert deployment["replicas"] == 3 and 'fleet = "' in text and "no-store" not in text
    env = {e["name"]: e["valueFrom"] for e in container["env"]}
    assert env["POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert set(env["TOKENPACE_STORE"]["secretKeyRef"]) == {"name", "key"}
    budget = docs["PodDisruptionBudget"]["spec"]
    assert budget["selector"]["matchLabels"] == labels and 0 < budget["minAvailable"] < deployment["replicas"]
    spool = re.search(r'spool = "([^"]+)"', text).group(1)  # type: ignore[union-attr]
    assert spool.startswith(mounts["records"] + "/") and "emptyDir" in volumes["records"]
    key_file = re.search(r'admin-key-file = "([^"]+)"', text).group(1)  # type: ignore[union-attr]
    assert key_file.startswith(mounts["admin-key"] + "/")
    assert (
        volumes["admin-key"]["secret"]["secretName"]
        == docs["ServiceMonitor"]["spec"]["endpoints"][0]["bearerTokenSecret"]["name"]
    )
    (tmp_path / "admin.key").write_text("k\n")
    config = tmp_path / "gateway.toml"
    config.write_text(text.replace(key_file, str(tmp_path / "admin.key")))
    check = run_cli("gateway", "--check-config", str(config))
    assert check.returncode == 0, check.stderr
    assert f"listening on 0.0.0.0:{ports['proxy']}" in check.stdout  # the proxy's port is the pod's
    assert f'admin-listen = "0.0.0.0:{ports["admin"]}"' in text  # so is the admin surface's
    shutdown_s = float(re.search(r'shutdown-timeout = "(\d+)s"', text).group(1))  # type: ignore[union-attr]
    assert pod["terminationGracePeriodSeconds"] > shutdown_s
    # the probes ask the admin port the gateway's own liveness and readiness pages
    assert container["livenessProbe"]["httpGet"] == {"path": "/tokenpace/live", "port": "admin"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/tokenpace/ready", "port": "admin"}
    service = docs["Service"]["spec"]
    assert service["selector"] == docs["Deployment"]["spec"]["selector"]["matchLabels"]
    assert {p["targetPort"] for p in service["ports"]} == set(ports)
    monitor = docs["ServiceMonitor"]["spec"]
    assert monitor["selector"]["matchLabels"].items() <= docs["Service"]["metadata"]["labels"].items()
    (endpoint,) = monitor["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["ports"]} and endpoint["path"] == "/metrics"
