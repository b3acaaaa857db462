"""Rated peak matrix throughput per GPU and dtype, with the vendor figure each comes from.

``compute_efficiency`` (performance_baseline ``--efficiency``) is achieved TFLOPS over the
device's rated peak for the dtype. The peak is per *device as torch sees it*: an MI250X
is two GCDs, each its own torch device with half the card's figure; a partitioned
MI300X (CPX: 38 of its 304 CUs per device) or an NVIDIA MIG slice gets the product's
figure scaled by its share of the compute units (CUs on AMD, SMs on NVIDIA) when the
device reports how many it has.

Figures are dense (no structured sparsity). NVIDIA's H100/H200 datasheets print the
tensor-core figures *with* sparsity; the table keeps the printed number in ``source``
and halves it. ``float32`` is the rate torch gets by default: on NVIDIA plain FP32 (TF32
is off by default for matmul, and the efficiency worker turns it off for convolutions
too); on AMD CDNA the FP32 matrix-core rate (rocBLAS/hipBLASLt use MFMA for FP32).
``int8`` is in TOPS.

A device no entry matches (a CPU, a consumer GPU, a name the facts leave ambiguous)
gets no peak, and the reason says why: its TFLOPS are reported without a fraction.
``resolve`` never guesses from a PCI id or from a vendor alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gatekeeper.machine.facts import Parsed

__all__ = ["DTYPES", "PRODUCTS", "DeviceFacts", "PeakResolution", "Product", "devices_from_capture", "resolve"]

DTYPES = ("float32", "float16", "bfloat16", "int8")


@dataclass(frozen=True)
class Product:
    name: str  # "MI300X"
    vendor: str  # "AMD" or "NVIDIA"
    arch: str  # "gfx942", "sm_90"
    match: str  # regex searched in the lowercased device name
    compute_units: int  # per device in its default mode (CUs on AMD, SMs on NVIDIA)
    peaks: Mapping[str, float]  # dtype -> dense TFLOPS (TOPS for int8) per device
    source: str  # the vendor document and the figures it prints
    clock_mhz: float | None = None  # peak engine clock the AMD figures assume (CUs x rate x clock)
    note: str = ""


_AMD_MI210 = "AMD Instinct MI210 accelerator datasheet, https://www.amd.com/system/files/documents/amd-instinct-mi210-brochure.pdf"
_AMD_MI200 = (
    "AMD Instinct MI200 series datasheet, https://www.amd.com/system/files/documents/amd-instinct-mi200-datasheet.pdf"
)
_AMD_MI300X = (
    "AMD Instinct MI300X data sheet, "
    "https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/data-sheets/amd-instinct-mi300x-data-sheet.pdf"
)
_AMD_MI300A = (
    "AMD Instinct MI300A data sheet, "
    "https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/data-sheets/amd-instinct-mi300a-data-sheet.pdf"
)
_AMD_MI325X = (
    "AMD Instinct MI325X data sheet, "
    "https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/product-briefs/instinct-mi325x-datasheet.pdf"
)
_NV_A100 = (
    "NVIDIA A100 Tensor Core GPU datasheet, "
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
)
_NV_H100 = "NVIDIA H100 Tensor Core GPU datasheet, https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
_NV_H200 = "NVIDIA H200 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/h200/"

PRODUCTS: tuple[Product, ...] = (
    Product(
        "MI210", "AMD", "gfx90a", r"\bmi210\b", 104,
        {"float32": 45.3, "float16": 181.0, "bfloat16": 181.0, "int8": 181.0},
        f"{_AMD_MI210}: peak FP32 matrix 45.3, FP16 181.0, BF16 181.0 TFLOPS, INT8 181.0 TOPS",
        clock_mhz=1700,
    ),
    Product(
        "MI250X", "AMD", "gfx90a", r"\bmi250x\b", 110,
        {"float32": 47.85, "float16": 191.5, "bfloat16": 191.5, "int8": 191.5},
        f"{_AMD_MI200}: MI250X peak FP32 matrix 95.7, FP16 383.0, BF16 383.0 TFLOPS, INT8 383.0 TOPS per card",
        clock_mhz=1700,
        note="a card is two GCDs of 110 CUs, each one torch device: half the card's figure",
    ),
    Product(
        "MI250", "AMD", "gfx90a", r"\bmi250\b(?!x)", 104,
        {"float32": 45.25, "float16": 181.05, "bfloat16": 181.05, "int8": 181.05},
        f"{_AMD_MI200}: MI250 peak FP32 matrix 90.5, FP16 362.1, BF16 362.1 TFLOPS, INT8 362.1 TOPS per card",
        clock_mhz=1700,
        note="a card is two GCDs of 104 CUs, each one torch device: half the card's figure",
    ),
    Product(
        "MI300X", "AMD", "gfx942", r"\bmi300x\b", 304,
        {"float32": 163.4, "float16": 1307.4, "bfloat16": 1307.4, "int8": 2614.9},
        f"{_AMD_MI300X}: peak FP32 matrix 163.4, FP16 1307.4, BF16 1307.4 TFLOPS, INT8 2614.9 TOPS",
        clock_mhz=2100,
        note="SPX mode (one device of 304 CUs); other partition modes are scaled by CUs",
    ),
    Product(
        "MI300A", "AMD", "gfx942", r"\bmi300a\b", 228,
        {"float32": 122.6, "float16": 980.6, "bfloat16": 980.6, "int8": 1961.2},
        f"{_AMD_MI300A}: peak FP32 matrix 122.6, FP16 980.6, BF16 980.6 TFLOPS, INT8 1961.2 TOPS",
        clock_mhz=2100,
    ),
    Product(
        "MI325X", "AMD", "gfx942", r"\bmi325x\b", 304,
        {"float32": 163.4, "float16": 1307.4, "bfloat16": 1307.4, "int8": 2614.9},
        f"{_AMD_MI325X}: peak FP32 matrix 163.4, FP16 1307.4, BF16 1307.4 TFLOPS, INT8 2614.9 TOPS",
        clock_mhz=2100,
        note="SPX mode (one device of 304 CUs); other partition modes are scaled by CUs",
    ),
    Product(
        "A100", "NVIDIA", "sm_80", r"\ba100\b", 108,
        {"float32": 19.5, "float16": 312.0, "bfloat16": 312.0, "int8": 624.0},
        f"{_NV_A100}: FP32 19.5, FP16 Tensor Core 312, BF16 Tensor Core 312 TFLOPS, INT8 Tensor Core 624 TOPS "
        "(dense; the same for SXM4 and PCIe, 40 and 80 GB)",
    ),
    Product(
        "H100 NVL", "NVIDIA", "sm_90", r"\bh100\b.*\bnvl\b", 132,
        {"float32": 60.0, "float16": 835.5, "bfloat16": 835.5, "int8": 1670.5},
        f"{_NV_H100}: H100 NVL FP32 60, FP16/BF16 Tensor Core 1,671 TFLOPS and INT8 3,341 TOPS with sparsity "
        "(dense: half)",
    ),
    Product(
        "H100 PCIe", "NVIDIA", "sm_90", r"\bh100\b.*\bpcie\b", 114,
        {"float32": 51.0, "float16": 756.5, "bfloat16": 756.5, "int8": 1513.0},
        f"{_NV_H100}: H100 PCIe FP32 51, FP16/BF16 Tensor Core 1,513 TFLOPS and INT8 3,026 TOPS with sparsity "
        "(dense: half)",
    ),
    Product(
        "H100 SXM", "NVIDIA", "sm_90", r"\bh100\b.*\b(?:sxm\d?|hbm3)\b", 132,
        {"float32": 67.0, "float16": 989.5, "bfloat16": 989.5, "int8": 1979.0},
        f"{_NV_H100}: H100 SXM FP32 67, FP16/BF16 Tensor Core 1,979 TFLOPS and INT8 3,958 TOPS with sparsity "
        "(dense: half)",
    ),
    Product(
        "H200 NVL", "NVIDIA", "sm_90", r"\bh200\b.*\bnvl\b", 132,
        {"float32": 60.0, "float16": 835.5, "bfloat16": 835.5, "int8": 1670.5},
        f"{_NV_H200}: H200 NVL FP32 60, FP16/BF16 Tensor Core 1,671 TFLOPS and INT8 3,341 TOPS with sparsity "
        "(dense: half)",
    ),
    Product(
        "H200 SXM", "NVIDIA", "sm_90", r"\bh200\b(?!.*\bnvl\b)", 132,
        {"float32": 67.0, "float16": 989.5, "bfloat16": 989.5, "int8": 1979.0},
        f"{_NV_H200}: H200 SXM FP32 67, FP16/BF16 Tensor Core 1,979 TFLOPS and INT8 3,958 TOPS with sparsity "
        "(dense: half)",
    ),
)  # fmt: skip

# Matrix operations per clock per compute unit on AMD CDNA, dense (the AMD figures are CUs x this x clock;
# tests/machine/test_peaks.py holds every AMD entry to it, so a mistyped figure cannot slip in).
AMD_OPS_PER_CLOCK_PER_CU: Mapping[str, Mapping[str, int]] = {
    "gfx90a": {"float32": 256, "float16": 1024, "bfloat16": 1024, "int8": 1024},
    "gfx942": {"float32": 256, "float16": 2048, "bfloat16": 2048, "int8": 4096},
}


@dataclass(frozen=True)
class DeviceFacts:
    """What a capture or torch says about one device (any of it may be missing)."""

    name: str | None = None  # "AMD Instinct MI300X", "NVIDIA H100 PCIe", "GH100 [H200 SXM 141GB]"
    arch: str | None = None  # "gfx942" (feature suffixes dropped) or "sm_90"
    compute_units: int | None = None  # CUs (AMD) or SMs (NVIDIA) of this device
    source: str = ""  # where the facts came from ("rocminfo.txt", "torch")


@dataclass(frozen=True)
class PeakResolution:
    product: Product | None
    scale: float = 1.0  # the device's share of the product's compute units
    reason: str = ""  # how it was resolved, or why there is no peak
    candidates: tuple[str, ...] = field(default_factory=tuple)

    def peak(self, dtype: str) -> float | None:
        if self.product is None or dtype not in self.product.peaks:
            return None
        return self.product.peaks[dtype] * self.scale


def normalise_arch(arch: str | None) -> str | None:
    """ "gfx942:sramecc+:xnack-" -> "gfx942"; "9.0" or "sm_90" -> "sm_90"; else None."""
    if not arch:
        return None
    text = arch.strip().lower().split(":")[0]
    if re.fullmatch(r"gfx[0-9a-f]+", text):
        return text
    m = re.fullmatch(r"(?:sm_)?(\d+)\.?(\d)", text)
    return f"sm_{m.group(1)}{m.group(2)}" if m else None


def resolve(device: DeviceFacts, products: Iterable[Product] = PRODUCTS) -> PeakResolution:
    """The product whose rated peak applies to ``device``, or none with the reason."""
    arch = normalise_arch(device.arch)
    name = (device.name or "").lower()[:200]  # a marketing name is short; a pasted one may not be
    pool = [p for p in products if arch is None or p.arch == arch]
    if not pool:
        return PeakResolution(None, reason=f"no rated peak in the table for arch {arch} ({device.name or 'no name'})")
    named = [p for p in pool if name and re.search(p.match, name)]
    if named:
        pool = named
    elif arch is None:
        return PeakResolution(None, reason=f"no rated peak in the table for {device.name or 'a device without name'}")
    cus = device.compute_units
    if len(pool) > 1 and cus:
        exact = [p for p in pool if p.compute_units == cus]
        pool = exact or pool
    names = tuple(p.name for p in pool)
    if len(pool) > 1 and all(p.peaks == pool[0].peaks and p.compute_units == pool[0].compute_units for p in pool):
        # e.g. MI300X and MI325X: one arch, one CU count, one set of rated figures
        pool = pool[:1]
    if len(pool) > 1:
        return PeakResolution(
            None,
            reason=f"the facts do not tell {', '.join(names)} apart (name {device.name!r}, arch {arch}, "
            f"{cus or 'unknown'} compute units)",
            candidates=names,
        )
    product = pool[0]
    shown = " or ".join(names)
    how = f"{shown} by {'name' if named else f'arch {arch} and {cus} compute units'}"
    if not named and cus != product.compute_units:
        return PeakResolution(
            None, reason=f"arch {arch} with {cus or 'unknown'} compute units matches no product's default mode"
        )
    if cus and cus != product.compute_units:
        scale = cus / product.compute_units
        return PeakResolution(product, scale, f"{how}, scaled to {cus} of {product.compute_units} compute units")
    return PeakResolution(product, 1.0, how)


_GPU_LINE_GFX = re.compile(r"\s*\((gfx[0-9a-f]+)[^)]*\)\s*$")


def devices_from_capture(parsed: Parsed) -> list[DeviceFacts]:
    """Every device a capture describes, from each file that names one (duplicates across files kept:
    the caller picks, and each says where it came from)."""
    out: list[DeviceFacts] = []
    if parsed.rocminfo:
        for g in parsed.rocminfo.gpus:
            out.append(DeviceFacts(g.marketing_name, g.gfx_base, g.compute_units, "rocminfo.txt"))
    for fname, a in parsed.amd_smi.items():
        for d in a.devices:
            out.append(DeviceFacts(d.market_name, d.gfx, d.compute_units, fname))
    for fname, smi in parsed.rocm_smi_files.items():
        for sd in smi.devices:
            out.append(DeviceFacts(sd.name, sd.gfx, None, fname))
    if parsed.kfd:
        for node in parsed.kfd.gpus:
            out.append(DeviceFacts(node.get("product_name"), node.gfx, None, "kfd-topology.txt"))
    if parsed.nvidia_smi:
        for n in parsed.nvidia_smi.gpus:
            out.append(DeviceFacts(n.name, n.compute_cap, None, "nvidia-smi.csv"))
    if parsed.lspci:
        for p in parsed.lspci.gpus:
            out.append(DeviceFacts(p.name, None, None, "lspci.txt"))
    if parsed.collect_env:
        for line in parsed.collect_env.gpus:
            m = _GPU_LINE_GFX.search(line)
            name = line[: m.start()] if m else line
            out.append(DeviceFacts(name.strip(), m.group(1) if m else None, None, "collect_env.txt"))
    return out
