"""Use case: ``tokenpace arms --apply`` and ``--set``: a gray release's step made on the running
gateway, through its admin surface (``GET``/``POST /tokenpace/config``, with an admin key).

``--apply`` moves the split as the verdict says (``core.analysis.rollout.ladder``): promote to the
ladder's next step, roll back the candidate to 0; a hold (undecided, a broken split, too little
traffic) moves nothing. ``--set ARM=P%`` is a manual step, whatever the verdict. The gateway records
each change in the store (who, when, from what to what) and starts a new config epoch; the next
``tokenpace arms`` judges the window since that change.
"""

from __future__ import annotations

import getpass
import socket
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

import orjson

from tokenpace.core.analysis.rollout.ladder import SplitMove, at_share, next_move
from tokenpace.core.events import ConfigChange

MAX_ANSWER_BYTES = 1 << 20  # the admin surface answers a page, not a data set
TIMEOUT_S = 10.0


class GatewayAdminError(ValueError):
    """The gateway's admin surface could not be reached, refused the key or the change (one line)."""


@dataclass(frozen=True, slots=True)
class AppliedMove:
    move: SplitMove
    epoch: int | None  # the gateway's epoch after the move (None: nothing was sent)


def who_moves(why: str) -> str:
    """Who asks: the command, its reason, the user and host (stored with the change)."""
    try:
        user = getpass.getuser()
    except Exception:  # no login name in a container: the host says enough
        user = "?"
    return f"tokenpace arms {why} by {user}@{socket.gethostname()}"


def _call(admin_url: str, key: str | None, body: dict[str, Any] | None) -> dict[str, Any]:
    url = admin_url.rstrip("/") + "/tokenpace/config"
    data = None if body is None else orjson.dumps(body)
    request = urllib.request.Request(url, data=data, method="GET" if body is None else "POST")
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
            raw = answer.read(MAX_ANSWER_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raw = exc.read(MAX_ANSWER_BYTES + 1)
        if exc.code != 422:  # 422: the change was refused, the answer says why
            raise GatewayAdminError(f"{url}: HTTP {exc.code} {_message(raw)}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise GatewayAdminError(f"{url}: cannot reach the gateway's admin surface ({reason})") from None
    try:
        answer_body = orjson.loads(raw[:MAX_ANSWER_BYTES])
    except orjson.JSONDecodeError:
        raise GatewayAdminError(f"{url}: the answer is not JSON: is it a tokenpace gateway?") from None
    if not isinstance(answer_body, dict):
        raise GatewayAdminError(f"{url}: unexpected answer")
    return answer_body


def _message(raw: bytes) -> str:
    try:
        return str(orjson.loads(raw)["error"]["message"])[:200]
    except Exception:
        return ""


def gateway_weights(admin_url: str, key: str | None) -> dict[str, float]:
    """The split the gateway runs now, by arm."""
    return ConfigChange.weights(_call(admin_url, key, None))


def send_weights(admin_url: str, key: str | None, weights: dict[str, float], who: str) -> int:
    """The new split; its epoch. GatewayAdminError with the gateway's reasons when refused."""
    answer = _call(admin_url, key, {"weights": weights, "by": who})
    if answer.get("errors"):
        raise GatewayAdminError("the gateway refused the change: " + "; ".join(map(str, answer["errors"])))
    return int(answer.get("epoch", 0))


def apply_verdict(
    verdict: str,
    reference: str,
    admin_url: str,
    key: str | None,
    ladder: tuple[float, ...],
    candidate: str | None = None,
    baseline: str | None = None,
) -> AppliedMove:
    """Move the running split as the verdict says (nothing for a hold); a ``baseline`` arm moves
    with the candidate (the same share)."""
    weights = gateway_weights(admin_url, key)
    arm = candidate or _only_candidate(weights, reference)
    move = next_move(verdict, weights, arm, ladder, baseline)
    if not move.moves:
        return AppliedMove(move, None)
    return AppliedMove(move, send_weights(admin_url, key, move.after, who_moves(f"--apply ({verdict})")))


def set_share(
    admin_url: str, key: str | None, arm: str, percent: float, baseline: str | None = None
) -> AppliedMove:
    """A manual step: the arm at ``percent`` of the weight (a ``baseline`` arm at the same), the
    others sharing the rest."""
    weights = gateway_weights(admin_url, key)
    for name in (arm, baseline) if baseline else (arm,):
        if name not in weights:
            raise GatewayAdminError(f"arm {name!r} is not in the gateway's split ({', '.join(weights)})")
    after = at_share(weights, arm, percent, baseline)
    move = SplitMove(weights, after, f"set: {arm} at {percent:g} %")
    if not move.moves:
        return AppliedMove(move, None)
    return AppliedMove(move, send_weights(admin_url, key, after, who_moves(f"--set {arm}={percent:g}%")))


def _only_candidate(weights: dict[str, float], reference: str) -> str:
    others = [a for a in weights if a != reference]
    if len(others) != 1:
        raise GatewayAdminError(
            f"the split has {len(others)} arms besides {reference}: name the one to move (--candidate ARM)"
        )
    return others[0]
