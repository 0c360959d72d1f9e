"""Which requests of a run are traced (``bench --otlp-sample SHARE``): a share of them, chosen by a
hash of the run's seed and each request's index in the workload.

Deterministic (the same seed samples the same requests, whichever worker sends them and in whatever
order they finish) and unbiased (each request is sampled with probability SHARE on its own, so the
late requests, where a tail often grows, are as likely to be traced as the first ones).
"""

from __future__ import annotations

import hashlib

_SPACE = 1 << 64


def check_share(share: float) -> None:
    if not 0 < share <= 1:
        raise ValueError(f"--otlp-sample must be a share in (0, 1], not {share:g}")


def trace_sampled(seed: int, index: int, share: float) -> bool:
    """Whether request ``index`` of a run seeded ``seed`` is traced at ``share`` (in (0, 1])."""
    if share >= 1:
        return True
    digest = hashlib.blake2b(f"{seed}:{index}".encode(), digest_size=8, person=b"tp-trace").digest()
    return int.from_bytes(digest, "big") < share * _SPACE
