"""tokenpace sim: a simulated OpenAI-compatible LLM serving engine, on the wall clock or a virtual one."""

# First: decides whether the engine's compiled build or its source is loaded (sim/native.py).
from tokenpace.sim import native  # noqa: F401  (must come first)
from tokenpace.sim.endpoints.faults import FaultConfig
from tokenpace.sim.endpoints.server import SimServer
from tokenpace.sim.model.engine import Engine
from tokenpace.sim.model.request import SimRequest
from tokenpace.sim.profiles.profile import Profile, get_network, get_profile, profile_names
from tokenpace.sim.virtual_time.virtual import VirtualResult, run_virtual, run_virtual_streamed
from tokenpace.sim.virtual_time.virtual_load import VirtualLoad
from tokenpace.sim.virtual_time.virtual_stream import StreamedStep, StreamedSummary
from tokenpace.sim.virtual_time.virtual_summary import VirtualSummary, summarize_virtual

__all__ = [
    "Engine",
    "FaultConfig",
    "Profile",
    "SimRequest",
    "SimServer",
    "StreamedStep",
    "StreamedSummary",
    "VirtualLoad",
    "VirtualResult",
    "VirtualSummary",
    "get_network",
    "get_profile",
    "profile_names",
    "run_virtual",
    "run_virtual_streamed",
    "summarize_virtual",
]
