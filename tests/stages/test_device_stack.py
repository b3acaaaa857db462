"""The stack facts a stage records for `gatekeeper history changes`: the collectives library's version
(RCCL on ROCm, NCCL on CUDA) beside MIOpen's. torch.cuda.nccl answers only on a GPU build, so the test
stands in for it."""

from __future__ import annotations

import pytest
import torch

from stages import device


@pytest.mark.parametrize(("kind", "key"), [("rocm", "rccl_version"), ("cuda", "nccl_version")])
def test_the_collectives_version_is_recorded_on_a_gpu(monkeypatch: pytest.MonkeyPatch, kind: str, key: str) -> None:
    monkeypatch.setattr(torch.cuda.nccl, "version", lambda: (2, 21, 5))
    monkeypatch.setattr(device, "_miopen_version", lambda: None)
    monkeypatch.setattr(device, "read_amdgpu_driver_version", lambda *a, **k: None)
    env = device.environment(device.DeviceInfo(kind, "cuda:0", name="gpu", count=1), channel="stable")
    assert env.extra[key] == "2.21.5"


def test_a_cpu_run_records_none() -> None:
    env = device.environment(device.DeviceInfo("cpu", "cpu"), channel="stable")
    assert "rccl_version" not in env.extra
    assert "nccl_version" not in env.extra


def test_the_rocm_version_file_is_read_bounded_and_only_when_regular(tmp_path) -> None:
    # 2026-12-04 audit: the stages read $ROCM_PATH/.info/version whole (read_text), as doctor did before the last
    # audit: a FIFO there hung verify_hip until something wrote to it, a huge file was read into memory. $ROCM_PATH
    # is the job's to set; the file goes through budgets.read_capped now (regular, 64 KiB), as doctor's does.
    import os
    import threading

    info = tmp_path / "rocm" / ".info"
    info.mkdir(parents=True)
    (info / "version").write_text("6.2.4-120\n")
    env = {"ROCM_PATH": str(tmp_path / "rocm")}
    assert device.read_rocm_version(env) == "6.2.4-120"
    with (info / "version").open("r+b") as fh:  # the same line, then a sparse GiB
        fh.truncate(1 << 30)
    assert device.read_rocm_version(env) is None
    (info / "version").unlink()
    os.mkfifo(info / "version")
    fifo = str(info / "version")
    monkey = pytest.MonkeyPatch()
    monkey.setattr(device.versions, "find_rocm_root", lambda environ: tmp_path / "rocm")  # its is_file() says no

    def writer() -> None:  # what a blocking open() would wait for: the old reader read this version
        fd = os.open(fifo, os.O_WRONLY)
        try:
            os.write(fd, b"6.2.4-120\n")
        except BrokenPipeError:  # the reader refused the FIFO and closed it
            pass
        finally:
            os.close(fd)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        assert device.read_rocm_version(env) is None
    finally:
        monkey.undo()
        if thread.is_alive():
            os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        thread.join(timeout=30)


def test_what_the_machine_says_with_control_characters_is_written_escaped_not_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    """The artifact schema refuses a control character in the environment (a reader cannot tell a forged value
    from a strange one). The stage itself escapes what the machine told it (a driver file, a tool's error), so a
    strange driver string costs one escaped field, not the stage's own report."""
    from gatekeeper.contract.stage_report import read_stage, write_stage
    from tests.support.builders import report

    monkeypatch.setattr(torch.cuda.nccl, "version", lambda: None)
    monkeypatch.setattr(device, "_miopen_version", lambda: "3.2.0\n")
    monkeypatch.setattr(device, "read_amdgpu_driver_version", lambda *a, **k: "6.8.5\x1b[2J")
    monkeypatch.setattr(device, "read_gpu_settings", lambda *a, **k: ({}, "rocm-smi failed:\nline two\ttab"))
    env = device.environment(device.DeviceInfo("rocm", "cuda:0", name="MI300X\u202e", count=1), channel="stable")
    assert env.driver == "6.8.5\\x1b[2J"
    assert env.device_name == "MI300X\\u202e"
    assert env.extra["miopen_version"] == "3.2.0\\x0a"
    assert env.extra["gpu_settings_unknown"] == "rocm-smi failed:\\x0aline two\\x09tab"
    path = write_stage(report("verify_hip", {}, [], environment=env), tmp_path)
    assert read_stage(path).environment.driver == "6.8.5\\x1b[2J"
