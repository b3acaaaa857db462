"""ONNX export: the dynamo exporter, falling back to the TorchScript exporter;
``onnx.checker``; a run in onnxruntime on CPU compared with torch.

``export_and_validate`` runs in an isolated worker: exporters trace the whole
model and can take the process down with them.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path
from typing import Any

__all__ = ["EXPORTERS", "INSTALL_HINT", "export_and_validate", "missing_reason"]

INSTALL_HINT = "pip install gatekeeper-rocm[onnx]"


def missing_reason() -> str:
    """Why the ONNX check cannot run here ('' when it can)."""
    absent = [m for m in ("onnx", "onnxruntime") if importlib.util.find_spec(m) is None]
    return f"{' and '.join(absent)} not installed ({INSTALL_HINT})" if absent else ""


def _check(name: str, status: str, message: str, seconds: float = 0.0, **details: Any) -> dict[str, Any]:
    return {"name": name, "status": status, "message": message, "duration_s": seconds, "details": details}


EXPORTERS = ("dynamo", "torchscript")


def _export(model: Any, x: Any, path: Path, exporters: tuple[str, ...]) -> tuple[str, list[str]]:
    """Try each exporter in turn; return (the one that worked, why the earlier ones failed)."""
    import torch

    tried: list[str] = []
    for exporter in exporters:
        for p in path.parent.glob(path.name + "*"):
            p.unlink()
        try:
            if exporter == "dynamo":
                # external_data: weights go to model.onnx.data beside the graph; both files are the model.
                torch.onnx.export(model, (x,), str(path), dynamo=True, external_data=True)
            elif exporter == "torchscript":
                torch.onnx.export(model, (x,), str(path), dynamo=False, input_names=["input"], output_names=["output"])
            else:
                raise ValueError(f"unknown exporter {exporter!r}")
            return exporter, tried
        except Exception as err:
            first = (str(err).strip().splitlines() or [""])[0][:300]
            tried.append(f"{exporter} exporter: {type(err).__name__}: {first}")
    raise RuntimeError("; ".join(tried))


def export_and_validate(
    *,
    model_spec: str | None,
    seed: int,
    batch_size: int,
    input_shape: tuple[int, ...] | None,
    out_dir: str,
    atol: float,
    exporters: tuple[str, ...] = EXPORTERS,
) -> dict[str, Any]:
    """Export, check and run the model; return {"checks": [...], "max_abs_error": float | None, ...}."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    import torch

    from stages.models import load_model

    loaded = load_model(model_spec, seed=seed)
    model = loaded.module.eval()
    x = loaded.example_input(batch_size, input_shape, seed)
    with torch.no_grad():
        want = model(x)
    if not isinstance(want, torch.Tensor):
        raise TypeError(f"the ONNX check compares one output tensor; the model returned {type(want).__name__}")
    path = Path(out_dir) / "model.onnx"
    path.parent.mkdir(parents=True, exist_ok=True)
    checks: list[dict[str, Any]] = []
    result: dict[str, Any] = {"checks": checks, "max_abs_error": None, "exporter": None}

    t0 = time.monotonic()
    try:
        exporter, tried = _export(model, x, path, exporters)
    except Exception as err:
        checks.append(_check("onnx.export", "failed", f"every exporter failed: {err}", time.monotonic() - t0))
        return result
    files = sorted(p.name for p in path.parent.glob(path.name + "*"))
    result["exporter"] = exporter
    note = f" (after: {tried[0]})" if tried else ""
    checks.append(
        _check(
            "onnx.export",
            "passed",
            f"{exporter} exporter{note}; files {', '.join(files)}",
            time.monotonic() - t0,
            exporter=exporter,
            fallback_from=tried,
            files=files,
        )
    )

    t0 = time.monotonic()
    try:
        onnx.checker.check_model(str(path), full_check=True)  # a path, so external weights are found
        proto = onnx.load(str(path), load_external_data=False)
        opset = max((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), default=None)
        checks.append(_check("onnx.checker", "passed", f"valid, opset {opset}", time.monotonic() - t0, opset=opset))
    except Exception as err:
        checks.append(_check("onnx.checker", "failed", f"{type(err).__name__}: {err}", time.monotonic() - t0))
        return result

    t0 = time.monotonic()
    try:
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        feed = {session.get_inputs()[0].name: x.numpy()}
        got = session.run(None, feed)[0]
    except Exception as err:
        msg = f"onnxruntime {ort.__version__} could not run it: {type(err).__name__}: {err}"
        checks.append(_check("onnx.onnxruntime", "failed", msg, time.monotonic() - t0))
        return result
    ref = want.numpy()
    if got.shape != ref.shape:
        msg = f"output shape {tuple(got.shape)} from onnxruntime, {tuple(ref.shape)} from torch"
        checks.append(_check("onnx.onnxruntime", "failed", msg, time.monotonic() - t0))
        return result
    err_abs = float(np.max(np.abs(got.astype(np.float64) - ref.astype(np.float64)))) if ref.size else 0.0
    result["max_abs_error"] = err_abs
    status = "passed" if err_abs <= atol else "failed"
    msg = f"onnxruntime {ort.__version__} CPU vs torch: max abs error {err_abs:.3g} (tolerance {atol:g})"
    checks.append(_check("onnx.onnxruntime", status, msg, time.monotonic() - t0, max_abs_error=err_abs))
    return result
