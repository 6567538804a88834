"""Metadata collected beside measurements: nvidia-smi parsing, names, digests."""

from tilesim.validate.gpu import metadata

SMI = (
    "name, clocks.current.sm [MHz], clocks.current.memory [MHz], clocks.max.sm [MHz], "
    "power.limit [W], temperature.gpu, driver_version, uuid\n"
    """NVIDIA H200, 1980 MHz, 3201 MHz, 1980 MHz, 700.00 W, 34, 580.159.04, GPU-64aaaa89-d40d
NVIDIA H200, 345 MHz, [N/A], 1980 MHz, [N/A], 30, 580.159.04, GPU-2a59c83e-eb52
"""
)


def test_parse_nvidia_smi_csv():
    rows = metadata.parse_nvidia_smi_csv(SMI)
    assert rows[0] == {
        "name": "NVIDIA H200",
        "clocks_sm_MHz": 1980.0,
        "clocks_mem_MHz": 3201.0,
        "clocks_max_sm_MHz": 1980.0,
        "power_limit_W": 700.0,
        "temperature_C": 34.0,
        "driver_version": "580.159.04",
        "uuid": "GPU-64aaaa89-d40d",
    }
    assert rows[1]["clocks_sm_MHz"] == 345.0 and rows[1]["uuid"] == "GPU-2a59c83e-eb52"
    assert rows[1]["clocks_mem_MHz"] is None and rows[1]["power_limit_W"] is None
    assert metadata.parse_nvidia_smi_csv("") == []


def test_query_matches_the_parser():
    cmd = metadata.nvidia_smi_command()
    fields = cmd[1].removeprefix("--query-gpu=").split(",")
    assert fields == [f for f, _ in metadata.NVIDIA_SMI_FIELDS]
    assert cmd[2] == "--format=csv"


def test_gpu_slug():
    assert metadata.gpu_slug("NVIDIA H200") == "h200"
    assert metadata.gpu_slug("NVIDIA H100 80GB HBM3") == "h100"
    assert metadata.gpu_slug("NVIDIA A100-SXM4-80GB") == "a100"
    assert metadata.gpu_slug("Some GPU!") == "some-gpu"


def test_source_digest_is_stable_and_versions_present(monkeypatch):
    assert metadata.source_digest() == metadata.source_digest()
    v = metadata.software_versions()
    assert v["python"] and v["tilesim"]
    monkeypatch.setenv("TILESIM_GIT_COMMIT", "abc123")
    assert metadata.git_commit() == "abc123"


def test_clock_sampler_reads_a_stream_of_clocks(tmp_path, monkeypatch):
    import os
    import time

    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\nwhile true; do echo 1755; echo '[N/A]'; sleep 0.02; done\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    t0 = time.perf_counter()
    with metadata.ClockSampler(interval_ms=20) as sampler:
        time.sleep(0.3)
    assert sampler.samples and {mhz for _, mhz in sampler.samples} == {1755.0}
    assert sampler.between(t0, time.perf_counter())
    assert sampler.between(0.0, t0) == []


def test_clock_sampler_without_nvidia_smi(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with metadata.ClockSampler() as sampler:
        pass
    assert sampler.samples == []
