"""The gateway's configuration as its command parses it (upstreams, listen address, mirror, static
labels, key files, the open-files limit) and the deploy artefacts it writes: the CLI reads them
here, so that it imports the app only."""

from __future__ import annotations

from tokenpace.gateway.config.config import (
    GatewayConfig,
    parse_listen,
    parse_static_labels,
    parse_upstream,
)
from tokenpace.gateway.config.config_check import every_problem
from tokenpace.gateway.config.config_file import ConfigFileError, Flag, read_config_file, to_defaults
from tokenpace.gateway.config.secrets import read_key_file
from tokenpace.gateway.experiments.mirror import parse_mirror
from tokenpace.gateway.observability.emit import emit
from tokenpace.gateway.operations.guard import fit_to_open_files

__all__ = [
    "ConfigFileError",
    "Flag",
    "GatewayConfig",
    "check_fleet_terms",
    "emit",
    "every_problem",
    "fit_to_open_files",
    "parse_listen",
    "parse_mirror",
    "parse_static_labels",
    "parse_upstream",
    "read_config_file",
    "read_key_file",
    "to_defaults",
]


def check_fleet_terms(config: GatewayConfig, fleet: str | None, save: bool, replica: str | None) -> None:
    """What a start refuses of a fleet's terms, as a ValueError (``--check-config`` lists it)."""
    from tokenpace.app.serving.gateway_serving import GatewayRefused, check_fleet

    try:
        check_fleet(config, fleet, save, replica)
    except GatewayRefused as exc:
        raise ValueError(str(exc)) from None
