from __future__ import annotations

import pytest

from stages.compat import extension


def test_no_compiler_is_a_reason(monkeypatch) -> None:
    monkeypatch.setenv("CXX", "gatekeeper-no-such-c++")
    reason = extension.toolchain_missing()
    assert reason in ("no C++ compiler (gatekeeper-no-such-c++ not on PATH)", "ninja not found (pip install ninja)")


def test_no_ninja_is_a_skip_with_the_reason(monkeypatch) -> None:
    import torch.utils.cpp_extension as cpp

    from stages._stage import SkipCheck

    monkeypatch.setattr(cpp, "is_ninja_available", lambda: False)
    assert extension.toolchain_missing() == "ninja not found (pip install ninja)"
    with pytest.raises(SkipCheck, match="ninja not found"):
        extension.build_and_call(gpu=False, device="cpu")


def test_toolchain_is_here() -> None:
    # ninja is a dependency and the runner images carry a C++ compiler: the build itself is tested end to end.
    assert extension.toolchain_missing() == ""
