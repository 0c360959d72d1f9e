"""How long one engine step takes: a roofline over the work the scheduler put in the step.

A step is bound by whichever is slower: computing (matmul FLOPs for every token in the step plus
attention over each token's context) or reading memory (the weights once per step, plus the KV cache
of every sequence that attends). Decode-only steps at small batch are memory bound (flat in batch
size), large prefills are compute bound (linear in tokens), and big decode batches cross over: the
shapes real engines show.

Four optional terms, all off in the shipped profiles (a calibration sets them, see docs/sim-explained.md):
packed attention (a step holding a prefill beside other sequences pays every (query, key) pair of the
whole step, `packed_pair_ns` each: transformers' continuous batching), a step floor (a launch- or
Python-bound engine: a step takes at least `step_floor_ms`, 0 in the shipped
profiles), a measured prefill table (step_noise.PrefillTable) prices prefill chunks instead of the roofline's
line-plus-curve, and step-time variability (step_noise.StepNoise) multiplies every step's duration.
"""

from __future__ import annotations

from tokenpace.sim.model.step_noise import PrefillTable, StepNoise
from tokenpace.sim.profiles.profile import Profile


class StepWork:
    """What the scheduler packed into one step (one per step: a plain class with its own __init__)."""

    __slots__ = (
        "decode_context", "decode_seqs", "prefill_chunks", "prefill_keys", "prefill_pairs",
        "prefill_tokens", "seqs",
    )  # fmt: skip

    def __init__(self, decode_seqs: int = 0, decode_context: int = 0, seqs: int = 0) -> None:
        self.prefill_tokens = 0  # tokens prefilled in this step (all chunks)
        self.prefill_pairs = 0.0  # causal (query, context) pairs of those chunks
        self.prefill_keys = 0  # keys those chunks' sequences hold once computed (cached + new)
        self.decode_seqs = decode_seqs  # sequences decoding one token
        self.decode_context = decode_context  # total context length those sequences attend to
        self.seqs = seqs  # sequences touched (prefill + decode)
        # (start, n) of each prefill chunk, for a measured prefill table; at most one per sequence in
        # the step, so bounded by max_num_seqs. None until the first chunk.
        self.prefill_chunks: list[tuple[int, int]] | None = None

    @property
    def tokens(self) -> int:
        return self.prefill_tokens + self.decode_seqs

    def add_prefill(self, start: int, n: int) -> None:
        """n new prompt tokens computed after `start` cached ones."""
        self.prefill_tokens += n
        self.prefill_pairs += prefill_pairs(start, n)
        self.prefill_keys += start + n
        if self.prefill_chunks is None:
            self.prefill_chunks = []
        self.prefill_chunks.append((start, n))


def prefill_pairs(start: int, n: int) -> float:
    """Causal attention pairs for n new tokens appended after `start` cached tokens."""
    return n * start + n * (n + 1) / 2.0


class CostModel:
    def __init__(self, profile: Profile, slowdown: float = 1.0, seed: int = 0) -> None:
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
        self._floor = e.step_floor_ms / 1e3  # 0: no floor (vLLM), the default
        self._packed = e.packed_pair_ns / 1e9  # 0: per-sequence attention (vLLM), the default
        self.slowdown = slowdown  # >1 while the engine is cold (see faults.cold_start)
        # A dense model reads all its weights whatever the step holds (None: MoE, per step)
        self._weights = None if m.experts > 0 else m.weight_bytes_read(1)
        eng = profile.engine
        self._table = PrefillTable.of(eng.prefill_table_tokens, eng.prefill_table_ms, self._roofline_prefill)
        self._noise = StepNoise.of(eng.step_cv, eng.step_cv_hold_ms, seed)

    def _roofline_prefill(self, n: float) -> float:
        """Compute time of an n-token prompt from scratch on the roofline (the table's extension)."""
        return (n * self._flops_tok + n * (n + 1) / 2.0 * self._flops_pair) / self._eff_flops

    def base_seconds(self, w: StepWork) -> float:
        """The step's duration without the variability term."""
        tokens = w.prefill_tokens + w.decode_seqs  # not the property: one call fewer a step
        if tokens == 0:
            return 0.0
        table = self._table
        packed = 0.0
        if self._packed and w.prefill_chunks and w.seqs > 1:
            # one attention over the packed step: every (query, key) pair of the step, not each
            # sequence's own (prefill_packing_fit), and never under the prompts' price as one packed
            # row (a prompt beside a decode costs no less than alone); a prompt alone keeps its own
            decode_flops = w.decode_seqs * self._flops_tok + w.decode_context * self._flops_pair
            compute = decode_flops / self._eff_flops
            if table is not None:
                own = table.chunks_seconds([(0, w.prefill_tokens)])
            else:
                own = (
                    w.prefill_tokens * self._flops_tok + w.prefill_pairs * self._flops_pair
                ) / self._eff_flops
            packed = max(own, self._packed * tokens * (w.prefill_keys + w.decode_context))
        elif table is not None and w.prefill_chunks:
            compute = (
                table.chunks_seconds(w.prefill_chunks)
                + (w.decode_seqs * self._flops_tok + w.decode_context * self._flops_pair) / self._eff_flops
            )
        else:
            compute = (
                tokens * self._flops_tok + (w.prefill_pairs + w.decode_context) * self._flops_pair
            ) / self._eff_flops
        weights = self._weights
        if weights is None:
            weights = self._model.weight_bytes_read(tokens)
        memory = (weights + w.decode_context * self._kv_tok) / self._eff_bw
        t = self._fixed + w.seqs * self._per_seq + max(compute, memory) + packed
        if t < self._floor:  # a launch-bound engine: the batch's work hides under the floor
            t = self._floor
        return t * self.slowdown

    def step_seconds(self, w: StepWork) -> float:
        """The step's duration: every step that runs draws its variability (a seeded stream)."""
        t = self.base_seconds(w)
        noise = self._noise
        return t * noise.factor(t) if noise is not None and t > 0 else t

    # Convenience figures for docs and --list-profiles (no variability: typical values).
    def decode_step_seconds(self, batch: int, context: int) -> float:
        return self.base_seconds(StepWork(decode_seqs=batch, decode_context=batch * context, seqs=batch))

    def prefill_seconds(self, n: int) -> float:
        work = StepWork(seqs=1)
        work.add_prefill(0, n)
        return self.base_seconds(work)
