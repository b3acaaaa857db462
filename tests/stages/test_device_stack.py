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
