from __future__ import annotations

import importlib.util
from pathlib import Path

from stages.compat import onnx_export


def tiny_model():  # torch is imported lazily so collecting this module stays cheap
    import torch

    class TinyNet(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(6, 3)

        def forward(self, x):
            return torch.tanh(self.fc(x))

        def example_input(self, batch_size: int = 2):
            return torch.randn(batch_size, 6)

    return TinyNet()


def test_missing_onnx_is_a_reason_with_the_install_hint(monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name))
    reason = onnx_export.missing_reason()
    assert "onnxruntime not installed" in reason
    assert "pip install gatekeeper-rocm[onnx]" in reason


def test_torchscript_exporter_validated_in_onnxruntime(tmp_path: Path) -> None:
    result = onnx_export.export_and_validate(
        model_spec="tests.stages.test_compat_onnx:tiny_model", seed=0, batch_size=3, input_shape=None,
        out_dir=str(tmp_path), atol=1e-5, exporters=("torchscript",),
    )  # fmt: skip
    by = {c["name"]: c for c in result["checks"]}
    assert [c["status"] for c in result["checks"]] == ["passed"] * 3, result
    assert result["exporter"] == "torchscript"
    assert by["onnx.onnxruntime"]["details"]["max_abs_error"] <= 1e-5
    assert (tmp_path / "model.onnx").is_file()


def test_every_exporter_failing_is_a_failed_export(tmp_path: Path) -> None:
    result = onnx_export.export_and_validate(
        model_spec="tests.stages.test_compat_onnx:tiny_model", seed=0, batch_size=3, input_shape=None,
        out_dir=str(tmp_path), atol=1e-5, exporters=("bogus",),
    )  # fmt: skip
    assert [c["name"] for c in result["checks"]] == ["onnx.export"]
    assert result["checks"][0]["status"] == "failed"
    assert "every exporter failed: bogus exporter: ValueError" in result["checks"][0]["message"]
    assert result["max_abs_error"] is None
