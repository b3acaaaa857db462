"""User cases (functional_test --cases) that fail as a worker does: one hangs past the
check timeout, one kills its worker with SIGSEGV. GK_PLANT says which one misbehaves;
the other passes."""

from __future__ import annotations

import os
import signal
import time


def case_waits_forever(device: str) -> None:
    if os.environ.get("GK_PLANT") == "hang":
        time.sleep(3600)


def case_native_crash(device: str) -> None:
    if os.environ.get("GK_PLANT") == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
