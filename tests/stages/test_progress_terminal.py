"""A stage in a terminal shows the live progress line the docs promise, and in a pipe (CI)
GitLab's section markers: checked in a real pseudo-terminal (Python's ``pty``).

The stage copies its output to ``<stage>.log`` through a pipe, so its own stdout is never
the terminal: before the fix it printed section markers on a terminal and never the live
line. The log file keeps only what the terminal finally shows of a rewritten line.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from stages.progress import LogLines

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = 100

HARNESS = """
import sys, time
from pathlib import Path
from stages._stage import tee_output
from stages.progress import Progress, section
with tee_output(Path(sys.argv[1])):
    with section("catalog", "functional_test: catalog"):
        progress = Progress("catalog", 3, interval_s=0.0)
        for done in range(1, 4):
            progress.update(done, f"case_{done}")
            time.sleep(0.05)
    print("done")
"""


def _in_terminal(argv: list[str], timeout: float = 300) -> tuple[int, bytes]:
    """Run ``argv`` with stdout and stderr on a pseudo-terminal of COLUMNS columns; (exit code, output)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, COLUMNS, 0, 0))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("COLUMNS", None)
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, cwd=ROOT, env=env)
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the terminal's last writer closed it
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
        else:
            pytest.fail(f"{argv} did not finish in {timeout} s")
        return proc.wait(timeout=30), bytes(out)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)


def test_terminal_gets_the_live_line_and_no_section_markers(tmp_path: Path) -> None:
    log = tmp_path / "stage.log"
    rc, out = _in_terminal([sys.executable, "-c", HARNESS, str(log)], timeout=120)
    assert rc == 0, out[-2000:]
    assert b"section_start" not in out, "GitLab markers are for job logs, not terminals"
    assert b"== functional_test: catalog" in out
    # the live line: rewritten in place with \r, one terminal row wide
    assert out.count(b"\rcatalog: ") == 3
    rows = [seg for seg in out.split(b"\r") if seg.startswith(b"catalog: ")]
    assert all(len(seg.rstrip(b"\n")) == COLUMNS - 1 for seg in rows), [len(s) for s in rows]
    # the log keeps what the terminal finally shows, without \r or padding
    text = log.read_bytes()
    assert b"\r" not in text
    assert b"catalog: 3/3 (100%)" in text
    assert b"catalog: 1/3" not in text
    assert not any(line.endswith(b" ") for line in text.splitlines())


def test_pipe_gets_gitlab_sections_and_plain_lines(tmp_path: Path) -> None:
    log = tmp_path / "stage.log"
    res = subprocess.run(
        [sys.executable, "-c", HARNESS, str(log)],
        capture_output=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert b"section_start:" in res.stdout
    assert b"\r" not in res.stdout.replace(b"\r\x1b[0K", b"")  # only the markers' own \r
    assert b"catalog: 3/3 (100%)" in res.stdout
    assert log.read_bytes() == res.stdout, "in CI the log is byte for byte what the job printed"


@pytest.mark.slow
def test_a_real_stage_in_a_terminal_shows_its_progress(tmp_path: Path) -> None:
    argv = [
        sys.executable, "-m", "gatekeeper", "stage", "functional_test", "--device", "cpu", "--out", str(tmp_path),
        "--categories", "basic_math", "--seeds", "1", "--dtypes", "float32", "--checkpoint-trials", "0",
        "--no-traced", "--no-sparse",
    ]  # fmt: skip
    rc, out = _in_terminal(argv)
    assert rc == 0, out[-3000:]
    assert b"\rcatalog: " in out, out[-3000:]
    assert b"section_start" not in out
    assert b"\n== operator catalog: " in out
    log = (tmp_path / "functional_test.log").read_bytes()
    assert b"\r" not in log
    assert b"catalog: " in log


@pytest.mark.parametrize(
    ("chunks", "expected"),
    [
        ([b"a\rb   \n"], b"b\n"),
        ([b"x\r", b"\ny\n"], b"x\ny\n"),  # \r\n split across chunks is a plain line end
        ([b"plain\n", b"no end"], b"plain\nno end"),
        ([b"p: 1/2\rp: 2/2  ", b"\n"], b"p: 2/2\n"),
    ],
)
def test_log_lines_keep_the_final_text(chunks: list[bytes], expected: bytes) -> None:
    lines = LogLines()
    assert b"".join(lines.feed(c) for c in chunks) + lines.flush() == expected


def test_log_lines_bound_an_unended_rewritten_line() -> None:
    lines = LogLines()
    for i in range(20000):
        assert lines.feed(f"\rprogress {i:06d}".encode()) == b""
    assert len(lines._pending) <= LogLines.MAX_PENDING + 32
    assert lines.flush() == b"progress 019999"
