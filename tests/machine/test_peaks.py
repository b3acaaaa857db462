"""The rated-peak table: every listed GPU resolves from real captured device facts (the probes' own
reading of tests/fixtures/env/), every figure names its vendor source, and the AMD figures agree with
CUs x matrix rate x clock, so a mistyped number cannot slip in."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gatekeeper.machine import peaks
from gatekeeper.machine.facts import parse_texts
from gatekeeper.machine.peaks import DeviceFacts, resolve

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "env"

# capture file -> (the name doctor --capture gives that tool's output, the product it must resolve to)
CAPTURES = {
    "amd-smi__rocm-systems-3654-list-and-static-mi210.txt": ("amd-smi.txt", "MI210"),
    "rocminfo__csc-summerschool-lumi-mi250x-gcd.txt": ("rocminfo.txt", "MI250X"),
    "rocminfo__thamada-mi300x-x4.txt": ("rocminfo.txt", "MI300X"),
    "rocminfo__rocm-6023-mi325x-one-agent.txt": ("rocminfo.txt", "MI325X"),
    "lspci__torchruntime-15-nn-a100-40gb-80gb.txt": ("lspci.txt", "A100"),
    "collect_env__pytorch-110153-h100-pcie-fragment.txt": ("collect_env.txt", "H100 PCIe"),
    "lspci__torchruntime-24-nn-h200-sxm-x8.txt": ("lspci.txt", "H200 SXM"),
}
LISTED = {"MI210", "MI250X", "MI300X", "MI325X", "A100", "H100", "H200"}


def _devices(fixture: str) -> list[DeviceFacts]:
    as_name, _ = CAPTURES[fixture]
    parsed = parse_texts({as_name: (FIXTURES / fixture).read_text(encoding="utf-8")})
    return peaks.devices_from_capture(parsed)


@pytest.mark.parametrize("fixture", sorted(CAPTURES))
def test_each_listed_gpu_resolves_from_a_real_capture(fixture: str) -> None:
    devices = _devices(fixture)
    assert devices, f"the probes read no device from {fixture}"
    want = CAPTURES[fixture][1]
    for device in devices:
        r = resolve(device)
        assert r.product is not None, r.reason
        assert r.product.name == want, r.reason
        assert r.scale == 1.0
        for dtype in peaks.DTYPES:
            assert r.peak(dtype) == r.product.peaks[dtype] > 0


def test_the_captures_cover_every_listed_gpu() -> None:
    covered = {want.split()[0] for _, want in CAPTURES.values()}
    assert covered == LISTED


def test_every_figure_names_its_vendor_document() -> None:
    for p in peaks.PRODUCTS:
        assert set(p.peaks) == set(peaks.DTYPES), p.name
        assert re.search(r"https://www\.(amd|nvidia)\.com/|https://resources\.nvidia\.com/", p.source), p.name
        assert "datasheet" in p.source.lower() or "data sheet" in p.source.lower(), p.name
        for dtype, figure in p.peaks.items():
            # the source prints the figure itself, the card's (two GCDs) or the with-sparsity one (dense x2)
            shown = {f"{v:{sep}.1f}".rstrip("0").rstrip(".") for v in (figure, figure * 2) for sep in ("", ",")}
            assert any(re.search(rf"(?<![\d.,]){re.escape(x)}(?![\d])", p.source) for x in shown), (p.name, dtype)


@pytest.mark.parametrize("product", [p for p in peaks.PRODUCTS if p.vendor == "AMD"], ids=lambda p: p.name)
def test_amd_figures_are_cus_times_matrix_rate_times_clock(product: peaks.Product) -> None:
    assert product.clock_mhz is not None
    for dtype, figure in product.peaks.items():
        rate = peaks.AMD_OPS_PER_CLOCK_PER_CU[product.arch][dtype]
        computed = product.compute_units * rate * product.clock_mhz * 1e6 / 1e12
        assert figure == pytest.approx(computed, rel=2e-3), (product.name, dtype)


def test_mi250x_gcd_without_a_name_needs_its_cu_count() -> None:
    assert resolve(DeviceFacts("AMD Instinct MI250X/MI250", "gfx90a", 110)).product.name == "MI250X"
    assert resolve(DeviceFacts("AMD Instinct MI250X/MI250", "gfx90a", 104)).product.name == "MI250"
    vague = resolve(DeviceFacts("AMD Instinct MI250X/MI250", "gfx90a:sramecc+:xnack-", None))
    assert vague.product is None
    assert "MI250X" in vague.reason
    assert "MI250" in vague.reason


def test_partitions_and_mig_slices_scale_by_compute_units() -> None:
    cpx = resolve(DeviceFacts("AMD Instinct MI300X", "gfx942", 38))
    assert cpx.product.name == "MI300X"
    assert cpx.peak("float16") == pytest.approx(1307.4 * 38 / 304)
    assert "38 of 304" in cpx.reason


def test_unknown_devices_get_no_peak_and_a_reason() -> None:
    for device in (
        DeviceFacts("x86_64", None, None),
        DeviceFacts("AMD Radeon RX 7900 XTX", "gfx1100", 96),
        DeviceFacts("NVIDIA GeForce RTX 4090", "8.9", 128),
        DeviceFacts("NVIDIA H100", "9.0", None),  # SXM, PCIe or NVL: not said
        DeviceFacts(None, "sm_80", None),  # A100 or A30: an arch alone is not a product
    ):
        r = resolve(device)
        assert r.product is None, device
        assert r.reason
        assert r.peak("float16") is None


def test_same_figures_products_resolve_together() -> None:
    r = resolve(DeviceFacts("", "gfx942", 304))
    assert r.product is not None
    assert "MI300X or MI325X" in r.reason
    assert r.peak("bfloat16") == 1307.4


def test_arch_normalisation() -> None:
    assert peaks.normalise_arch("gfx90a:sramecc+:xnack-") == "gfx90a"
    assert peaks.normalise_arch("9.0") == "sm_90"
    assert peaks.normalise_arch("sm_80") == "sm_80"
    assert peaks.normalise_arch("cpu") is None
