"""Runs matrix cases in forked children of one process and measures each child's peak memory.

``python -m tests.security.matrix_driver CASES.json RESULTS.json``: CASES is a list of
``{"id", "argv", "cwd", "env", "out", "err"}``. gatekeeper is imported once here; each case runs
``gatekeeper.cli.main(argv)`` in a fork (so one child's memory or hang cannot touch the next), with an
address-space limit (a reader that slurps /dev/zero fails instead of taking the machine) and an alarm
(a reader that blocks on a FIFO is killed). RESULTS gets, per id: the exit code (or the signal that ended
the child) and its peak resident memory (``ru_maxrss`` from ``wait4``).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys

ADDRESS_LIMIT = 6 * 2**30  # far above the memory bound the matrix asserts; only a runaway reader reaches it
ALARM_S = int(os.environ.get("GATEKEEPER_MATRIX_ALARM_S", "60"))


def _child(case: dict) -> None:
    from gatekeeper.cli import main

    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_LIMIT, ADDRESS_LIMIT))
    signal.alarm(ALARM_S)
    os.chdir(case["cwd"])
    os.environ.clear()
    os.environ.update(case["env"])
    out = os.open(case["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    err = os.open(case["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(out, 1)
    os.dup2(err, 2)
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115 (the child's own streams)
    sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    try:
        code = main(case["argv"])
    except BaseException:  # a bug past main's own handler: report it as 70 too
        code = 70
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(code))


def main(argv: list[str]) -> int:
    cases = json.loads(open(argv[0], encoding="utf-8").read())  # noqa: SIM115
    import gatekeeper.cli  # noqa: F401  (imported once, before the forks)

    baseline_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    results = {}
    for case in cases:
        pid = os.fork()
        if pid == 0:
            _child(case)
        _, status, usage = os.wait4(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        results[case["id"]] = {"code": code, "peak_mib": usage.ru_maxrss / 1024, "parent_mib": baseline_kib / 1024}
    with open(argv[1], "w", encoding="utf-8") as fh:
        json.dump(results, fh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
