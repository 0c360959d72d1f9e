"""The local GPUs read with ``nvidia-smi --query-gpu``, rewritten in DCGM's names and labels, so a
scrape of it has the shape of a dcgm-exporter page's (core/analysis/diagnosis/gpu_metrics.py).

``nvidia-smi`` is a program, not a page: it is run with a deadline and its answer read within a cap,
as a page is; a field it cannot read (``[N/A]``, ``[Not Supported]``) is left out.
"""

from __future__ import annotations

import shutil
import socket
import subprocess

NVIDIA_SMI = "nvidia-smi"  # the --gpu-metrics value that means "run it here"
QUERY = "index,uuid,name,utilization.gpu,memory.used,power.draw,clocks.sm"
# the query's columns after index, uuid, name -> DCGM's field names
COLUMNS = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_SM_CLOCK")
MAX_ANSWER_BYTES = 64 * 1024  # a line per GPU, about 100 bytes each
MAX_GPU_LINES = 64  # lines read; core keeps at most its own MAX_GPUS of them


def command() -> list[str]:
    return [NVIDIA_SMI, f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"]


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', "'")[:128]


def smi_samples(text: str, hostname: str) -> dict[str, float]:
    """nvidia-smi's CSV (no header, no units) -> {series key: value} in DCGM's names; raises
    ValueError when no line has the query's columns."""
    out: dict[str, float] = {}
    lines = [line for line in text.splitlines() if line.strip()][:MAX_GPU_LINES]
    for line in lines:
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != 3 + len(COLUMNS):
            continue
        index, uuid, name = (_quoted(c) for c in cells[:3])
        labels = f'Hostname="{_quoted(hostname)}",UUID="{uuid}",gpu="{index}",modelName="{name}"'
        for field, cell in zip(COLUMNS, cells[3:], strict=True):
            try:
                out[f"{field}{{{labels}}}"] = float(cell)
            except ValueError:
                continue  # [N/A], [Not Supported]
    if not out and lines:
        raise ValueError(f"nvidia-smi answered no reading: {lines[0][:120]!r}")
    return out


def read_nvidia_smi(timeout_s: float) -> dict[str, float]:
    """One reading of every local GPU; raises OSError or ValueError (said in one line) when none."""
    try:
        proc = subprocess.run(
            command(), capture_output=True, timeout=timeout_s, check=False, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        raise ValueError(f"nvidia-smi did not answer within {timeout_s:g} s") from None
    if len(proc.stdout) > MAX_ANSWER_BYTES:
        raise ValueError(f"nvidia-smi's answer is over {MAX_ANSWER_BYTES // 1024} KiB: not read")
    if proc.returncode != 0:
        why = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise ValueError(f"nvidia-smi failed ({proc.returncode}): {why[0][:160] if why else ''}")
    return smi_samples(proc.stdout.decode("utf-8", "replace"), socket.gethostname())


def probe_nvidia_smi(timeout_s: float = 5.0) -> str | None:
    """None when nvidia-smi is here and reads a GPU, else why not."""
    if shutil.which(NVIDIA_SMI) is None:
        return "nvidia-smi is not on this host's PATH (no local NVIDIA driver)"
    try:
        if not read_nvidia_smi(timeout_s):
            return "nvidia-smi lists no GPU"
    except (OSError, ValueError) as exc:
        return str(exc)
    return None
