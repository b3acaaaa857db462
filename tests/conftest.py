from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"

# CI (.ci/run) sets GATEKEEPER_REQUIRE_TOOLS=1: there a skip is a failure. Read here, at import, because the
# autouse fixture below clears every GATEKEEPER_* variable inside each test.
REQUIRE_TOOLS = os.environ.get("GATEKEEPER_REQUIRE_TOOLS") == "1"

# The only skips CI accepts: a fact about the machine's hardware that no installation step can change.
# A test opts out by skipping with a reason that starts with "hardware: <fact>" (hardware_skip below);
# every such skip is listed at the end of the run. A missing package, tool or command is never one of these.
HARDWARE_FACTS = ("no GPU", "fewer than 2 GPUs", "no docker/podman engine")
_HARDWARE_SKIPS: list[tuple[str, str]] = []


def hardware_skip(fact: str, detail: str = "") -> str:
    """The skip reason for a hardware fact: ``pytest.skip(hardware_skip("no GPU", "..."))``."""
    if fact not in HARDWARE_FACTS:
        raise ValueError(f"{fact!r} is not a hardware fact; one of {HARDWARE_FACTS}")
    return f"hardware: {fact}" + (f": {detail}" if detail else "")


def _skip_reason(report: pytest.CollectReport | pytest.TestReport) -> str:
    longrepr: Any = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _is_hardware(reason: str) -> bool:
    return any(reason == f"hardware: {f}" or reason.startswith(f"hardware: {f}:") for f in HARDWARE_FACTS)


def _skips_fail(report: pytest.CollectReport | pytest.TestReport) -> None:
    """The one rule: under GATEKEEPER_REQUIRE_TOOLS=1 every skip but a hardware fact's is a failure.

    Applied to test reports (a skip mark, pytest.skip in a fixture or a test) and to collection reports
    (a module-level pytest.importorskip). An xfail is not a skip here (xfail_strict is on)."""
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = _skip_reason(report)
    if _is_hardware(reason) or not REQUIRE_TOOLS:
        return
    report.outcome = "failed"
    report.longrepr = (
        f"GATEKEEPER_REQUIRE_TOOLS=1: a skip is a failure here ({reason}). Install what is missing "
        f"(make setup, make tools), or skip only for a hardware fact: {', '.join(HARDWARE_FACTS)} (tests/conftest.py)"
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    _skips_fail(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):  # type: ignore[no-untyped-def]
    outcome = yield
    _skips_fail(outcome.get_result())


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Here, not in makereport: with pytest-xdist this runs in the controller, which writes the summary.
    if report.skipped and not hasattr(report, "wasxfail") and _is_hardware(_skip_reason(report)):
        _HARDWARE_SKIPS.append((report.nodeid, _skip_reason(report)))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _HARDWARE_SKIPS:
        terminalreporter.section("skipped for a hardware fact (allowed under GATEKEEPER_REQUIRE_TOOLS=1)")
        for nodeid, reason in _HARDWARE_SKIPS:
            terminalreporter.write_line(f"{nodeid}: {reason}")


@pytest.fixture(autouse=True)
def _no_real_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may touch the real home directory or inherit CI/secret variables."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    for name in list(os.environ):
        if name.startswith(("CI_", "GITLAB_", "SLACK_", "GATEKEEPER_")) or name == "CI":
            monkeypatch.delenv(name, raising=False)


@pytest.fixture
def repo_root() -> Path:
    return REPO
