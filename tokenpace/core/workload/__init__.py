"""What to send: one package for every workload source (synthetic, dataset, length pairs, trace),
the shapes laid over them (shared prefixes, multi-turn sessions), the length distributions, the
prompts made to a length, and the arrival offsets of an open loop. Pure and seeded."""

from tokenpace.core.workload.dataset import DatasetEntry, DatasetWorkload
from tokenpace.core.workload.item import WorkItem, Workload, stable_seed
from tokenpace.core.workload.lengths import LengthDist, LengthSpecError, parse_length
from tokenpace.core.workload.pairs import PairsWorkload
from tokenpace.core.workload.synthetic import SyntheticWorkload, TokenizedSynthetic
from tokenpace.core.workload.trace import TraceRow, TraceWorkload
from tokenpace.core.workload.words import WORDS

__all__ = [
    "WORDS",
    "DatasetEntry",
    "DatasetWorkload",
    "LengthDist",
    "LengthSpecError",
    "PairsWorkload",
    "SyntheticWorkload",
    "TokenizedSynthetic",
    "TraceRow",
    "TraceWorkload",
    "WorkItem",
    "Workload",
    "parse_length",
    "stable_seed",
]
