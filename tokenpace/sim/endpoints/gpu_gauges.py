"""DCGM-style GPU gauges for the simulator's /metrics, in NVIDIA's names and labels, so GPU
telemetry (bench, sweep, plan, the gateway) runs without a GPU.

Utilisation is the engine's step occupancy: the share of the last second its steps ran (DCGM's
GPU_UTIL: the share of time a kernel ran). Power is a plain model: an idle floor, and the rest of
the board's power drawn while busy, more with a fuller batch. Memory is what vLLM preallocates.
"""

from __future__ import annotations

from collections import deque

from tokenpace.sim.profiles.profile import Profile

WINDOW_S = 1.0  # utilisation over the last second, as dcgm-exporter's sample period
MAX_STEPS = 8192  # steps remembered: a second's worth at 0.12 ms a step
IDLE_SHARE = 0.15  # an idle board draws this share of its power limit
BUSY_FLOOR = 0.55  # a busy board with a batch of one draws this share of the rest
# (name fragment, board power W, boost SM clock MHz); the first that the hardware's name holds
BOARDS = (
    ("H200", 700.0, 1980.0),
    ("H100", 700.0, 1980.0),
    ("A100", 400.0, 1410.0),
    ("L40", 300.0, 2490.0),
    ("L4", 72.0, 2040.0),
    ("Orin", 60.0, 1300.0),
)
DEFAULT_BOARD = (400.0, 1500.0)
IDLE_CLOCK_MHZ = 345.0


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


class GpuGauges:
    """One per engine: every GPU of the profile's hardware (tensor parallel: all as busy)."""

    def __init__(self, profile: Profile, worker: int | None = None) -> None:
        hw = profile.hardware
        self.gpus = max(1, hw.gpus)
        name = hw.name.split("x ", 1)[1] if hw.name[:1].isdigit() and "x " in hw.name else hw.name
        self.model = _label(name.split(" (")[0])
        self.power_w, self.boost_mhz = next(
            ((p, c) for frag, p, c in BOARDS if frag in hw.name), DEFAULT_BOARD
        )
        self.fb_mib = hw.mem_gb * 1024 * profile.engine.gpu_memory_utilization
        self.max_seqs = max(1, profile.engine.max_num_seqs)
        self.worker = worker or 0
        self.steps: deque[tuple[float, float, float]] = deque(maxlen=MAX_STEPS)  # start, end, batch fill

    def step(self, start: float, end: float, running: int) -> None:
        self.steps.append((start, end, min(1.0, running / self.max_seqs)))

    def occupancy(self, now: float) -> tuple[float, float]:
        """(share of the last WINDOW_S the steps ran, the batch fill weighted by that time)."""
        lo = now - WINDOW_S
        busy = weighted = 0.0
        for start, end, fill in reversed(self.steps):
            if end <= lo:
                break
            part = max(0.0, min(end, now) - max(start, lo))
            busy += part
            weighted += part * fill
        share = min(1.0, busy / WINDOW_S)
        return share, weighted / busy if busy > 0 else 0.0

    def render(self, now: float) -> list[str]:
        share, fill = self.occupancy(now)
        idle = IDLE_SHARE * self.power_w
        power = idle + (self.power_w - idle) * share * (BUSY_FLOOR + (1 - BUSY_FLOOR) * fill)
        values = {
            "DCGM_FI_DEV_GPU_UTIL": round(100 * share),
            "DCGM_FI_DEV_FB_USED": round(self.fb_mib),
            "DCGM_FI_DEV_POWER_USAGE": round(power, 3),
            "DCGM_FI_DEV_SM_CLOCK": self.boost_mhz if share > 0 else IDLE_CLOCK_MHZ,
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE": round(share, 6),
        }
        lines = []
        for name, value in values.items():
            lines.append(f"# TYPE {name} gauge")
            for i in range(self.gpus):
                labels = (
                    f'gpu="{i}",UUID="GPU-tokenpace-sim-{self.worker}-{i}",device="nvidia{i}",'
                    f'modelName="{self.model}",Hostname="tokenpace-sim"'
                )
                lines.append(f"{name}{{{labels}}} {value}")
        return lines
