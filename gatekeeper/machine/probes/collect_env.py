"""``python -m torch.utils.collect_env`` output (and the vLLM variants, including the
sectioned one with padded ``Key     : value`` lines): torch version, the ROCm/HIP or
CUDA it was built with, MIOpen, the GPUs. Any subset of the lines is read; a line
that is not there leaves its fact None. Also a collect_env that crashed (its
traceback is reported, not parsed as facts)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["CollectEnv", "parse"]

_MISSING = {"", "N/A", "Could not collect", "None", "No CUDA"}
_FIELDS = {
    "PyTorch version": "torch_version",
    "Is debug build": "debug_build",
    "CUDA used to build PyTorch": "cuda_build",
    "ROCM used to build PyTorch": "rocm_build",
    "OS": "os",
    "Python version": "python",
    "Is CUDA available": "cuda_available",
    "CUDA runtime version": "cuda_runtime",
    "GPU models and configuration": "gpu_line",
    "Nvidia driver version": "nvidia_driver",
    "cuDNN version": "cudnn",
    "HIP runtime version": "hip_runtime",
    "MIOpen runtime version": "miopen",
}
# Matched on stripped lines, without lazy parts before a "\s*": those backtracked quadratically on long blank runs.
_KEY = re.compile(r"^([A-Za-z][A-Za-z ()/]*[A-Za-z()/])\s*:\s*(.*)$")
_GPU_LINE = re.compile(r"^GPU \d+:\s*(.+)$")
_GFX = re.compile(r"\((gfx[0-9a-f]+(?::[a-z]+[+-])*)\)")


@dataclass(frozen=True)
class CollectEnv:
    torch_version: str | None = None
    debug_build: bool | None = None
    cuda_build: str | None = None
    rocm_build: str | None = None
    hip_runtime: str | None = None
    miopen: str | None = None
    cuda_available: bool | None = None
    cuda_runtime: str | None = None
    nvidia_driver: str | None = None
    cudnn: str | None = None
    os: str | None = None
    python: str | None = None
    gpus: tuple[str, ...] = ()  # "AMD Instinct MI250X/MI250 (gfx90a:sramecc+:xnack-)", "Device 66a1"
    crashed: bool = False
    error: str | None = None  # the exception line when collect_env itself failed
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def gfx_archs(self) -> tuple[str, ...]:
        """Full gfx targets named in the GPU lines (newer collect_env appends them)."""
        return tuple(dict.fromkeys(m.group(1) for g in self.gpus for m in _GFX.finditer(g)))


def _bool(value: str | None) -> bool | None:
    if value in ("True", "Yes"):
        return True
    if value in ("False", "No"):
        return False
    return None


def parse(text: str) -> CollectEnv:
    values: dict[str, str | None] = {}
    gpus: list[str] = []
    error = None
    crashed = False
    in_gpu_block = False
    for raw in text.splitlines():
        line = raw.strip().strip("`").strip()
        if in_gpu_block:
            m = _GPU_LINE.match(line)
            if m:
                gpus.append(m.group(1))
                continue
            in_gpu_block = False
        if line.startswith("Traceback (most recent call last)"):
            crashed = True
        m = re.match(r"^(\w+(?:Error|Exception)):\s*(.*)$", line)
        if m and not values.get("torch_version"):
            crashed, error = True, line
            continue
        kv = _KEY.match(line)
        if not kv or kv.group(1) not in _FIELDS:
            continue
        name, value = _FIELDS[kv.group(1)], kv.group(2)
        if name == "gpu_line":
            if value in _MISSING:
                in_gpu_block = True  # CUDA machines list "GPU 0: ..." on the following lines
            else:
                one = _GPU_LINE.match(value)  # one CUDA GPU: "GPU models and configuration: GPU 0: NAME"
                gpus.append(one.group(1) if one else value)
            continue
        values.setdefault(name, None if value in _MISSING else value)
    warnings = []
    if crashed:
        warnings.append(f"collect_env crashed: {error or 'traceback without an exception line'}")
    if values.get("torch_version") is None and not crashed:
        warnings.append("no 'PyTorch version' line: not collect_env output, or cut")
    if not values and not gpus and not crashed:
        warnings.append("none of collect_env's lines found")
    if values.get("rocm_build") and values.get("hip_runtime") is None:
        warnings.append("ROCm build without a 'HIP runtime version' line")
    return CollectEnv(
        torch_version=values.get("torch_version"),
        debug_build=_bool(values.get("debug_build")),
        cuda_build=values.get("cuda_build"),
        rocm_build=values.get("rocm_build"),
        hip_runtime=values.get("hip_runtime"),
        miopen=values.get("miopen"),
        cuda_available=_bool(values.get("cuda_available")),
        cuda_runtime=values.get("cuda_runtime"),
        nvidia_driver=values.get("nvidia_driver"),
        cudnn=values.get("cudnn"),
        os=values.get("os"),
        python=values.get("python"),
        gpus=tuple(gpus),
        crashed=crashed,
        error=error,
        warnings=tuple(warnings),
    )
