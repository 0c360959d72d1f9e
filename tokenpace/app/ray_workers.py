"""``--ray ADDRESS|auto``: the worker processes as Ray actors. Ray is an optional extra
(``pip install 'tokenpace[ray]'``); without it the flag says so before any load."""

from __future__ import annotations

import importlib.util

from tokenpace.app.preflight import PreflightError

RAY_INSTALL = "pip install 'tokenpace[ray]'"


class RayUnavailableError(PreflightError):
    """--ray was asked for and cannot be honoured here."""


def ray_installed() -> bool:
    return importlib.util.find_spec("ray") is not None


def require_ray() -> None:
    """Before any load: Ray must be importable, or the user learns how to install it."""
    if not ray_installed():
        raise RayUnavailableError(f"--ray needs Ray, an optional extra: {RAY_INSTALL}")
    raise RayUnavailableError(
        "--ray: running the workers as Ray actors is not built yet; use --workers N on one machine"
    )
