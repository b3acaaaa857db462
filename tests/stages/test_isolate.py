from __future__ import annotations

import sys

import pytest

from stages.isolate import Worker, run_isolated


@pytest.fixture
def probe_module(tmp_path, monkeypatch):
    (tmp_path / "iso_probe_mod.py").write_text(
        "import os, time, ctypes\n"
        "def double(x): return 2 * x\n"
        "def fails(): raise AssertionError('values differ')\n"
        "def segv(): ctypes.string_at(0)\n"
        "def hang(): time.sleep(600)\n"
        "def abort(): os.abort()\n"
        "def pid(): return os.getpid()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path) + ":" + ":".join(sys.path))
    return "iso_probe_mod"


def test_worker_survives_crashes_hangs_and_aborts(probe_module):
    m = probe_module
    with Worker() as w:
        first = w.call(f"{m}:pid", timeout=60)
        assert w.call(f"{m}:double", 21, timeout=60).value == 42
        assert w.call(f"{m}:pid", timeout=60).value == first.value  # one process serves many calls
        raised = w.call(f"{m}:fails", timeout=60)
        assert raised.kind == "raised"
        assert raised.error_type == "AssertionError"
        seg = w.call(f"{m}:segv", timeout=60)
        assert seg.kind == "crashed"
        assert "SIGSEGV" in seg.message
        hung = w.call(f"{m}:hang", timeout=1.5)
        assert hung.kind == "timeout"
        assert "timed out after 1.5 s" in hung.message
        ab = w.call(f"{m}:abort", timeout=60)
        assert ab.kind == "crashed"
        assert "SIGABRT" in ab.message
        assert w.call(f"{m}:double", 2, timeout=60).value == 4
        assert w.restarts == 3


def test_run_isolated_one_shot(probe_module):
    assert run_isolated(f"{probe_module}:double", 5, timeout=60).value == 10
