"""Cross-stack parity: save the model's outputs and gradients on one stack (``--golden-save``),
compare another stack's with them (``--golden``).

A golden directory holds ``golden.json`` (the stack that made it, the run's model
configuration, the tensor names and shapes, and the SHA-256 of the tensor file) and
the tensors: ``golden.safetensors`` when the safetensors package is installed, else
``golden.pt`` written by ``torch.save`` and read back with ``torch.load(weights_only=True)``,
which refuses anything but tensors and plain containers (no arbitrary unpickling).

Besides the outputs and gradients the golden keeps the model's initial state and
the input batch, and the comparing run loads both: two torch versions may initialise
weights differently, and that is not what parity measures. The model runs in eval
mode (dropout off: its random mask differs between stacks) in float32 with TF32 off;
one forward and one backward of the same loss as the whole-model check.

Per tensor the comparison gives the cosine similarity and the normwise relative error
``max|this - golden| / max|golden|`` (for gradients the scale is at least the largest
golden gradient, as in the whole-model check). A tensor on one side only, a shape
change or a non-finite value counts as cosine 0 and error 1: the metrics fail closed.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib
import json
import os
import platform
from pathlib import Path
from typing import Any

from gatekeeper.core import budgets, files
from gatekeeper.core.errors import InputError
from gatekeeper.core.files import atomic_write
from stages.device import tf32_off

__all__ = ["META", "SCHEMA_VERSION", "compare", "read_meta", "save", "write_golden"]

META = "golden.json"
SCHEMA_VERSION = 1
_MAX_META_BYTES = 1 << 20
_MAX_TENSOR_BYTES = 4 << 30  # a typo guard on what a run will read back


def _capture(
    spec: str | None, batch_size: int, input_shape: tuple[int, ...] | None, seed: int, device: str, *, given: Any = None
) -> dict[str, Any]:
    """{"input.0", "state.*", "output.*", "grad.*"} as CPU float32 tensors (state and input from ``given``)."""
    import torch

    from stages.functional.compare import flatten
    from stages.functional.model_compare import model_loss
    from stages.models import load_model

    tf32_off()
    loaded = load_model(spec, seed=seed)
    model = loaded.module.float()
    if given is None:
        x = loaded.example_input(batch_size, input_shape, seed).float()
        state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    else:
        x = given["input.0"]
        state = {k.removeprefix("state."): v for k, v in given.items() if k.startswith("state.")}
        model.load_state_dict(state, strict=True)
    model = model.to(device).eval()
    out = model(x.to(device))
    model_loss(out).backward()
    tensors: dict[str, Any] = {"input.0": x.detach().cpu().contiguous()}
    tensors |= {f"state.{k}": v.detach().cpu().contiguous() for k, v in state.items()}
    outs = [o for o in flatten(out) if isinstance(o, torch.Tensor)]
    tensors |= {f"output.{i}": o.detach().float().cpu().contiguous() for i, o in enumerate(outs)}
    for name, p in model.named_parameters():
        if p.grad is not None:
            tensors[f"grad.{name}"] = p.grad.detach().float().cpu().contiguous()
    return tensors


def _stack(device: str) -> dict[str, Any]:
    import torch

    name = torch.cuda.get_device_name(0) if device.startswith("cuda") else platform.processor() or "cpu"
    return {
        "torch": torch.__version__,
        "device": device,
        "device_name": name,
        "hip": getattr(torch.version, "hip", None),
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
    }


def write_golden(directory: Path, tensors: dict[str, Any], meta: dict[str, Any]) -> Path:
    """Write the tensor file and golden.json (both atomically; the JSON last, naming the file's hash)."""
    directory.mkdir(parents=True, exist_ok=True)
    try:  # an optional package: imported by name, so type checkers need no stubs for it
        st = importlib.import_module("safetensors.torch")
        fmt, name, data = "safetensors", "golden.safetensors", st.save(tensors)
    except ImportError:
        import io

        import torch

        buf = io.BytesIO()
        torch.save(tensors, buf)
        fmt, name, data = "torch", "golden.pt", buf.getvalue()
    atomic_write(directory / name, data)
    shapes = {k: {"shape": list(v.shape), "dtype": str(v.dtype).removeprefix("torch.")} for k, v in tensors.items()}
    doc = {
        "schema_version": SCHEMA_VERSION,
        **meta,
        "format": fmt,
        "file": name,
        "sha256": hashlib.sha256(data).hexdigest(),
        "tensors": shapes,
    }
    return atomic_write(directory / META, json.dumps(doc, indent=2, sort_keys=True))


def save(
    *, spec: str | None, batch_size: int, input_shape: tuple[int, ...] | None, seed: int, device: str, directory: str
) -> dict[str, Any]:
    """Worker side of ``--golden-save``."""
    tensors = _capture(spec, batch_size, input_shape, seed, device)
    from stages.models import DEMO_SPEC

    config = {"model": spec or DEMO_SPEC, "batch_size": batch_size, "seed": seed}
    config["input_shape"] = list(input_shape) if input_shape else None
    meta = {"created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "stack": _stack(device)}
    path = write_golden(Path(directory), tensors, {**meta, "config": config})
    compared = sorted(k for k in tensors if k.startswith(("output.", "grad.")))
    return {"path": str(path), "tensors": len(compared), "stack": meta["stack"]}


def read_meta(directory: Path, config: dict[str, Any]) -> dict[str, Any]:
    """golden.json of ``directory``, checked against this run's model configuration (InputError if unusable)."""
    path = directory / META
    where = str(path)
    if not os.path.lexists(path):
        raise InputError(where, "--golden", "no golden.json here", "create one with --golden-save DIR")
    try:  # the strict reader: a regular file (a link to /dev/zero is refused, not read forever), bounded
        doc = files.read_json(path, what="golden.json", max_bytes=_MAX_META_BYTES)
    except InputError as err:
        raise InputError(
            where, err.where, f"not a readable golden.json: {err.problem}", "save it again with --golden-save"
        ) from None
    if not isinstance(doc, dict) or doc.get("schema_version") != SCHEMA_VERSION:
        version = doc.get("schema_version") if isinstance(doc, dict) else None
        raise InputError(
            where, "schema_version", f"{version!r} is not {SCHEMA_VERSION}", "save it again with this gatekeeper"
        )
    for key, kind in (("config", dict), ("stack", dict), ("tensors", dict), ("file", str), ("sha256", str)):
        if not isinstance(doc.get(key), kind):
            raise InputError(where, key, f"missing or not a {kind.__name__}", "save it again with --golden-save")
    if doc["file"] not in ("golden.safetensors", "golden.pt"):
        raise InputError(where, "file", f"{doc['file']!r} is not golden.safetensors or golden.pt", "save it again")
    _check_tensor_file(directory / doc["file"], doc["sha256"])
    for key in ("model", "batch_size", "input_shape", "seed"):
        theirs, ours = doc["config"].get(key), config[key]
        if theirs != ours:
            raise InputError(
                where,
                f"config.{key}",
                f"the golden was made with {theirs!r}, this run uses {ours!r}",
                "run with the golden's --model/--batch-size/--input-shape/--seed, or save a new golden",
            )
    return doc


def _check_tensor_file(path: Path, sha256: str) -> bytes:
    try:  # a regular file only, read once and bounded: the bytes hashed are the bytes loaded
        data = budgets.read_capped(path, max_bytes=_MAX_TENSOR_BYTES, what="golden tensor file")
    except InputError as err:
        raise InputError(
            path, err.where, err.problem, "save the golden again (with a smaller batch if too large)"
        ) from None
    if hashlib.sha256(data).hexdigest() != sha256:
        raise InputError(path, "", "its SHA-256 differs from golden.json (truncated or edited)", "save it again")
    return data


def _read_tensors(directory: Path, meta: dict[str, Any]) -> dict[str, Any]:
    path = directory / meta["file"]
    data = _check_tensor_file(path, meta["sha256"])
    if meta["file"].endswith(".safetensors"):
        return importlib.import_module("safetensors.torch").load(data)
    import io

    import torch

    tensors = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    if not isinstance(tensors, dict):
        raise InputError(path, "", "does not hold a name -> tensor mapping", "save it again")
    return tensors


def compare(
    *,
    spec: str | None,
    batch_size: int,
    input_shape: tuple[int, ...] | None,
    seed: int,
    device: str,
    directory: str,
    meta: dict[str, Any],
) -> dict[str, Any]:
    """Worker side of ``--golden``: this stack's outputs and gradients against the golden's."""
    import torch

    golden = _read_tensors(Path(directory), meta)
    mine = _capture(spec, batch_size, input_shape, seed, device, given=golden)
    names = sorted(k for k in set(golden) | set(mine) if k.startswith(("output.", "grad.")))
    grads = [golden[k] for k in names if k.startswith("grad.") and k in golden]
    grad_scale = max((float(g.abs().max()) for g in grads if g.numel()), default=0.0)
    rows: dict[str, dict[str, Any]] = {}
    for name in names:
        if name not in golden or name not in mine:
            rows[name] = {"problem": "only in the golden" if name in golden else "not in the golden"}
            continue
        a, b = mine[name].double().flatten(), golden[name].double().flatten()
        if a.shape != b.shape:
            rows[name] = {"problem": f"shape {list(mine[name].shape)} != golden {list(golden[name].shape)}"}
            continue
        floor = grad_scale if name.startswith("grad.") else 0.0
        scale = max(float(b.abs().max()) if b.numel() else 0.0, floor)
        diff = float((a - b).abs().max()) if b.numel() else 0.0
        if not torch.isfinite(a).all():
            rows[name] = {"problem": "non-finite values"}
            continue
        rel = diff / scale if scale > 0 else diff
        # a tensor that is zero up to rounding (the bias before a batch norm) has no direction to compare
        tiny = b.numel() == 0 or float(b.abs().max()) <= 1e-6 * max(floor, 1e-300)
        cos = None if tiny else float(torch.dot(a, b) / max(float(a.norm() * b.norm()), 1e-300))
        if cos is not None and torch.equal(a, b):
            cos = 1.0  # identical: exactly 1, not 1 - rounding of the dot product
        rows[name] = {"cosine": cos, "max_rel_error": rel}
    for row in rows.values():
        if "problem" in row:  # no agreement at all: the metrics fail closed
            row |= {"cosine": 0.0, "max_rel_error": 1.0}
    return {
        "rows": rows,
        "cosine_min": min((r["cosine"] for r in rows.values() if r["cosine"] is not None), default=None),
        "max_rel_error": max((r["max_rel_error"] for r in rows.values()), default=None),
        "problems": {k: r["problem"] for k, r in rows.items() if "problem" in r},
        "stack": _stack(device),
    }
