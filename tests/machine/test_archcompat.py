from __future__ import annotations

import pytest

from gatekeeper.machine.archcompat import GfxTarget, check_cuda, check_rocm, code_object_runs_on, override_target

# Arch lists of the shape torch.cuda.get_arch_list() returns on official wheels.
ROCM_WHEEL = ["gfx900", "gfx906", "gfx908", "gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1101"]
ROCM_OLD_WHEEL = ["gfx900", "gfx906", "gfx908", "gfx90a", "gfx1030"]  # before MI300 and RDNA3 targets
CU121 = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]
CU128 = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"]


@pytest.mark.parametrize(
    ("device", "archs", "ok"),
    [
        ("gfx906", ROCM_WHEEL, True),
        ("gfx906:sramecc+:xnack-", ROCM_WHEEL, True),
        ("gfx908:sramecc+:xnack-", ROCM_WHEEL, True),
        ("gfx90a:sramecc+:xnack-", ROCM_WHEEL, True),
        ("gfx90a:sramecc+:xnack+", ROCM_WHEEL, True),
        ("gfx942:sramecc+:xnack-", ROCM_WHEEL, True),
        ("gfx942:sramecc+:xnack-", ROCM_OLD_WHEEL, False),
        ("gfx1030", ROCM_WHEEL, True),
        ("gfx1100", ROCM_WHEEL, True),
        ("gfx1100", ROCM_OLD_WHEEL, False),
        ("gfx1031", ROCM_WHEEL, False),
        ("gfx90a:xnack-", ["gfx90a:xnack+"], False),
        ("gfx90a:xnack+", ["gfx90a:xnack+"], True),
        ("gfx90a:xnack-", ["gfx90a:xnack-", "gfx90a:xnack+"], True),
        ("gfx90a", ["gfx90a:xnack+"], True),  # device does not say: the pinned object may load
        ("gfx942:sramecc+:xnack-", ["gfx942:sramecc-"], False),
        ("gfx1101", ["gfx11-generic"], True),
        ("gfx1030", ["gfx11-generic"], False),
    ],
)
def test_rocm_matrix(device: str, archs: list[str], ok: bool) -> None:
    result = check_rocm(device, archs)
    assert result.compatible is ok, result.message
    if not ok:
        assert "hipErrorNoBinaryForGpu" in result.message
        assert result.remediation


def test_missing_target_names_wheel_and_source_build() -> None:
    r = check_rocm("gfx942:sramecc+:xnack-", ROCM_OLD_WHEEL, rocm_family="6.2")
    assert "https://download.pytorch.org/whl/rocm6.2" in r.remediation
    assert "PYTORCH_ROCM_ARCH=gfx942" in r.remediation
    assert r.effective_arch == "gfx942:sramecc+:xnack-"


def test_xnack_pinned_build_remediation() -> None:
    r = check_rocm("gfx90a:sramecc+:xnack-", ["gfx90a:xnack+"])
    assert r.compatible is False
    assert "HSA_XNACK=1" in r.remediation
    assert "PYTORCH_ROCM_ARCH=gfx90a" in r.remediation


def test_override_makes_sibling_load_and_is_reported() -> None:
    r = check_rocm("gfx1031", ROCM_WHEEL, override="10.3.0")
    assert r.compatible is True
    assert r.effective_arch == "gfx1030"
    assert any("HSA_OVERRIDE_GFX_VERSION=10.3.0 is in effect" in n for n in r.notes)


def test_override_suggested_for_known_sibling_only() -> None:
    r = check_rocm("gfx1031", ROCM_WHEEL)
    assert "HSA_OVERRIDE_GFX_VERSION=10.3.0" in r.remediation
    assert "PYTORCH_ROCM_ARCH=gfx1031" in r.remediation
    r = check_rocm("gfx1100", ROCM_OLD_WHEEL)
    assert "HSA_OVERRIDE_GFX_VERSION" not in r.remediation  # no gfx1100 sibling target in that list


def test_override_to_missing_target_fails() -> None:
    r = check_rocm("gfx1100", ROCM_WHEEL, override="9.4.2")
    assert r.effective_arch == "gfx942"
    assert r.compatible is True  # gfx942 is in the list; the note carries the risk
    r = check_rocm("gfx1100", ["gfx1100"], override="10.3.0")
    assert r.compatible is False


def test_override_detected_from_chip_id() -> None:
    # rocminfo__vbs-nn-rx6700xt-override.txt: RX 6700 XT (chip 0x73df, Navi 22) reports gfx1030
    r = check_rocm("gfx1030", ROCM_WHEEL, chip_id="0x73df")
    assert r.compatible is True
    assert any("natively gfx1031" in n for n in r.notes)


@pytest.mark.parametrize(
    ("value", "target"),
    [("10.3.0", "gfx1030"), ("11.0.0", "gfx1100"), ("9.0.10", "gfx90a"), ("9.4.2", "gfx942"), ("x", None)],
)
def test_override_target(value: str, target: str | None) -> None:
    assert override_target(value) == target


def test_bad_override_value_is_a_note() -> None:
    r = check_rocm("gfx1100", ROCM_WHEEL, override="gfx1030")
    assert r.compatible is True
    assert any("not MAJOR.MINOR.STEP" in n for n in r.notes)


def test_gfx_target_round_trip() -> None:
    t = GfxTarget.parse("gfx90a:sramecc+:xnack-")
    assert str(t) == "gfx90a:sramecc+:xnack-"
    assert t.feature("xnack") is False
    assert code_object_runs_on(GfxTarget.parse("gfx90a"), t)
    with pytest.raises(ValueError, match="not a gfx target"):
        GfxTarget.parse("sm_80")


def test_no_arch_list_is_unknown() -> None:
    assert check_rocm("gfx90a", []).compatible is None
    assert check_cuda("8.0", []).compatible is None
    assert check_rocm("garbage", ROCM_WHEEL).compatible is None


@pytest.mark.parametrize(
    ("cc", "archs", "ok", "ptx_only"),
    [
        ("7.0", CU121, True, False),
        ("8.0", CU121, True, False),
        ("8.6", CU121, True, False),
        ("8.9", CU121, True, False),  # Ada runs sm_86 SASS (same major, higher minor)
        ("9.0", CU121, True, False),
        ("7.0", CU128, False, False),  # Volta dropped from these wheels
        ("8.9", CU128, True, False),
        ("12.0", CU121, False, False),
        ("12.0", CU128, True, False),
        ("9.0", ["sm_80", "compute_80"], True, True),  # PTX JIT-compiles forward
        ("8.6", ["sm_90", "compute_90"], False, False),  # PTX never runs backwards
        ("9.0", ["sm_90a"], True, False),
        ("9.1", ["sm_90a"], False, False),  # arch-specific SASS: exact CC only
        ("8.0", ["sm_86"], False, False),  # SASS never runs on a lower minor
    ],
)
def test_cuda_matrix(cc: str, archs: list[str], ok: bool, ptx_only: bool) -> None:
    r = check_cuda(cc, archs)
    assert r.compatible is ok, r.message
    assert any("JIT" in n for n in r.notes) is ptx_only
    if not ok:
        assert f"TORCH_CUDA_ARCH_LIST={cc}" in r.remediation
        assert "no kernel image" in r.message
