"""How long one engine step takes: a roofline over the work the scheduler put in the step.

A step is bound by whichever is slower: computing (matmul FLOPs for every token in the step plus
attention over each token's context) or reading memory (the weights once per step, plus the KV cache
of every sequence that attends). Decode-only steps at small batch are memory bound (flat in batch
size), large prefills are compute bound (linear in tokens), and big decode batches cross over: the
shapes real engines show.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenpace.sim.profile import Profile


@dataclass(slots=True)
class StepWork:
    """What the scheduler packed into one step."""

    prefill_tokens: int = 0  # tokens prefilled in this step (all chunks)
    prefill_pairs: float = 0.0  # causal (query, context) pairs of those chunks
    decode_seqs: int = 0  # sequences decoding one token
    decode_context: int = 0  # total context length those sequences attend to
    seqs: int = 0  # sequences touched (prefill + decode)

    @property
    def tokens(self) -> int:
        return self.prefill_tokens + self.decode_seqs


def prefill_pairs(start: int, n: int) -> float:
    """Causal attention pairs for n new tokens appended after `start` cached tokens."""
    return n * start + n * (n + 1) / 2.0


class CostModel:
    def __init__(self, profile: Profile, slowdown: float = 1.0) -> None:
        m = profile.model
        self._flops_tok = m.flops_per_token
        self._flops_pair = m.attn_flops_per_pair
        self._kv_tok = m.kv_bytes_per_token
        self._eff_flops = profile.eff_flops
        self._eff_bw = profile.eff_bw
        self._model = m
        e = profile.efficiency
        self._fixed = (e.step_overhead_ms + e.tp_comm_ms) / 1e3
        self._per_seq = e.per_seq_overhead_us / 1e6
        self.slowdown = slowdown  # >1 while the engine is cold (see faults.cold_start)
        # A dense model reads all its weights whatever the step holds (None: MoE, per step)
        self._weights = None if m.experts > 0 else m.weight_bytes_read(1)

    def step_seconds(self, w: StepWork) -> float:
        tokens = w.prefill_tokens + w.decode_seqs
        if tokens == 0:
            return 0.0
        compute = (tokens * self._flops_tok + (w.prefill_pairs + w.decode_context) * self._flops_pair) / (
            self._eff_flops
        )
        weights = self._weights
        if weights is None:
            weights = self._model.weight_bytes_read(tokens)
        memory = (weights + w.decode_context * self._kv_tok) / self._eff_bw
        t = self._fixed + w.seqs * self._per_seq + max(compute, memory)
        return t * self.slowdown

    # Convenience figures for docs and --list-profiles.
    def decode_step_seconds(self, batch: int, context: int) -> float:
        return self.step_seconds(StepWork(decode_seqs=batch, decode_context=batch * context, seqs=batch))

    def prefill_seconds(self, n: int) -> float:
        return self.step_seconds(StepWork(prefill_tokens=n, prefill_pairs=prefill_pairs(0, n), seqs=1))
