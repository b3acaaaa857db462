from __future__ import annotations

import os
import sys
import textwrap
import time

from gatekeeper.core import proc


def test_captures_output_and_exit_code():
    r = proc.run([sys.executable, "-c", "import sys; print('hi'); sys.exit(3)"], timeout=30)
    assert r.returncode == 3
    assert r.stdout.strip() == "hi"
    assert r.describe() == "exited with code 3"
    assert not r.ok


def test_timeout_kills_the_whole_group_including_grandchildren(tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    code = textwrap.dedent(f"""
        import subprocess, sys, time
        g = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        open({str(pidfile)!r}, "w").write(str(g.pid))
        time.sleep(600)
    """)
    r = proc.run([sys.executable, "-c", code], timeout=2)
    assert r.timed_out  # the event: proc.run returned because of its timeout (pytest-timeout guards a real hang)
    assert r.returncode is None
    assert "timed out after" in r.describe()
    pid = int(pidfile.read_text())
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError("grandchild survived the timeout")


def test_signal_is_named():
    r = proc.run([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"], timeout=30)
    assert r.describe() == "killed by SIGSEGV"


def test_missing_program_is_reported_not_raised():
    r = proc.run(["/nonexistent/tool", "--x"], timeout=5)
    assert r.start_error
    assert "could not start" in r.describe()
