"""tokenpace sim: a simulated OpenAI-compatible LLM serving engine, on the wall clock or a virtual one."""

from tokenpace.sim.engine import Engine, SimRequest
from tokenpace.sim.faults import FaultConfig
from tokenpace.sim.profile import Profile, get_network, get_profile, profile_names
from tokenpace.sim.server import SimServer
from tokenpace.sim.virtual import VirtualResult, run_virtual, summarize
from tokenpace.sim.workload import LengthDist, Workload

__all__ = [
    "Engine",
    "FaultConfig",
    "LengthDist",
    "Profile",
    "SimRequest",
    "SimServer",
    "VirtualResult",
    "Workload",
    "get_network",
    "get_profile",
    "profile_names",
    "run_virtual",
    "summarize",
]
