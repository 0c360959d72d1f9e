"""GPU readings scraped as the engine's are: a scripted dcgm-exporter (NVIDIA's names and labels),
hostile answers held to the same bounds, and nvidia-smi's CSV rewritten in DCGM's names."""

from __future__ import annotations

import os
import stat
import time

from tokenpace.adapters.servermetrics import probe_gpu_url, probe_nvidia_smi
from tokenpace.adapters.servermetrics.nvidia_smi import read_nvidia_smi, smi_samples
from tokenpace.adapters.servermetrics.scraper import scrape_once
from tokenpace.core.analysis.diagnosis.gpu_metrics import MAX_GPUS, analyse_gpu, readings
from tokenpace.testing.dcgm_exporter import DcgmExporter

SMI = """0, GPU-5fd4c8a2-0000-0000-0000-000000000000, NVIDIA H100 80GB HBM3, 87, 71234, 512.33, 1980
1, GPU-5fd4c8a2-0000-0000-0000-000000000001, NVIDIA H100 80GB HBM3, 43, 70000, [N/A], 1755
"""


def test_a_dcgm_exporter_page_is_scraped_with_its_labels():
    with DcgmExporter(gpus=2, util=[35.0], spread=10.0) as exp:
        assert probe_gpu_url(exp.url) is None
        scrape = scrape_once(exp.url, 2.0)
    got = readings(scrape["samples"])
    assert sorted(got.values) == ["gpu-node-1/0", "gpu-node-1/1"]
    assert got.values["gpu-node-1/1"]["util_pct"] == 45.0
    assert got.gpus["gpu-node-1/0"].model == "NVIDIA H100 80GB HBM3"


def test_an_exporter_without_profiling_fields_still_reads():
    with DcgmExporter(prof=False) as exp:
        values = readings(scrape_once(exp.url, 2.0)["samples"]).values["gpu-node-1/0"]
    assert "gr_engine_active" not in values and values["util_pct"] == 50.0


def test_a_page_that_is_no_dcgm_exporter_is_refused_by_the_probe():
    with DcgmExporter(hostile="garbage") as exp:
        assert "not Prometheus text" in (probe_gpu_url(exp.url) or "")
    assert "did not answer" in (probe_gpu_url("http://127.0.0.1:9/metrics", timeout_s=1) or "")


def test_hostile_pages_get_the_server_metrics_bounds():
    with DcgmExporter(hostile="oversize") as exp:
        assert "over 2 MiB" in scrape_once(exp.url, 2.0)["error"]
    with DcgmExporter(hostile="slow") as exp:
        t = time.monotonic()
        assert "too slow" in scrape_once(exp.url, 0.5)["error"]
        assert time.monotonic() - t < 5  # the whole read has one deadline, not one per byte
    with DcgmExporter(hostile="out_of_range") as exp:
        scrapes = [scrape_once(exp.url, 2.0)]
    out = analyse_gpu(scrapes, scrapes[0]["t_ns"])
    assert out["dropped_readings"] == 3 and out["series"]["mean"] == {"fb_used_mib": [[0.0, 1000.0]]}
    with DcgmExporter(hostile="many_gpus") as exp:
        scrapes = [scrape_once(exp.url, 2.0)]
    assert len(analyse_gpu(scrapes, 0)["gpus"]) == MAX_GPUS


def test_nvidia_smi_csv_is_rewritten_in_dcgm_names():
    got = readings(smi_samples(SMI, "host-a"))
    assert got.values["host-a/0"] == {
        "util_pct": 87.0,
        "fb_used_mib": 71234.0,
        "power_w": 512.33,
        "sm_clock_mhz": 1980.0,
    }
    assert "power_w" not in got.values["host-a/1"]  # [N/A] is left out, not read as zero
    assert got.gpus["host-a/1"].uuid.endswith("0001")


def test_nvidia_smi_absent_is_said_plainly(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert "not on this host's PATH" in (probe_nvidia_smi() or "")


def test_a_fake_nvidia_smi_is_run_with_the_query_and_read(monkeypatch, tmp_path):
    fake = tmp_path / "nvidia-smi"
    fake.write_text(
        f'#!/bin/sh\ncase "$1" in --query-gpu=index,uuid,*) ;; *) exit 9;; esac\ncat <<EOF\n{SMI}EOF\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert probe_nvidia_smi() is None
    assert len(readings(read_nvidia_smi(5.0)).values) == 2
    scrape = scrape_once("nvidia-smi", 2.0)
    assert len(readings(scrape["samples"]).values) == 2
    fake.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    assert "nvidia-smi failed (9): NVIDIA-SMI has failed" in (probe_nvidia_smi() or "")
