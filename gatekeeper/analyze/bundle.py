"""Reproduction bundle for a failure no signature knows: what an upstream bug report needs.

``<dir>/environment.txt`` (``gatekeeper doctor --capture`` output, raw tool
outputs in ``doctor-capture/``; the redacted environment variables when doctor
is missing or fails), ``repro.py`` + ``cases.json``
(the failing checks' op, shapes, dtypes and seed, where the stage recorded
them), ``log-excerpt.txt``, ``analysis.json`` and a README.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gatekeeper.analyze import repro_rules
from gatekeeper.analyze.diagnosis import FailedCheck, FailureDiagnosis
from gatekeeper.core import files, proc
from gatekeeper.core.redact import redact, redact_env

__all__ = ["DOCTOR_TIMEOUT_S", "repro_cases", "repro_script", "write_bundle"]

DOCTOR_TIMEOUT_S = 120.0

_REPRO_HEAD = '''\
"""Reproduce the failing checks recorded by gatekeeper (generated; edit freely).

Runs each case on the GPU when torch sees one (else the CPU) and compares with
a CPU float64 reference. Usage: python repro.py

Only ATen operators (through torch.ops.aten) and a fixed table of public torch
functions are called, with bounded shapes and known dtypes: cases.json comes
from the artifacts, and the rules below refuse anything else in it.
"""
'''

_REPRO_MAIN = '''

import json
import pathlib

import torch

DTYPE_OF = {
    "bool": torch.bool, "uint8": torch.uint8, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32,
    "int64": torch.int64, "float16": torch.float16, "half": torch.float16, "bfloat16": torch.bfloat16,
    "float32": torch.float32, "float": torch.float32, "float64": torch.float64, "double": torch.float64,
    "complex64": torch.complex64,
}


def shown(text):
    return ascii(str(text))[1:-1][:120]


def resolve(op):
    """An op that passed refusal(): 'aten.add.Tensor' through torch.ops.aten, else a listed public function."""
    if op.startswith("aten."):
        parts = op.split(".")
        packet = getattr(torch.ops.aten, parts[1])
        return getattr(packet, parts[2] if len(parts) > 2 else "default")
    target = torch
    for part in op.split(".")[1:]:
        target = getattr(target, part)
    return target


def make(shape, dtype, device):
    dt = DTYPE_OF[dtype]
    if dt.is_floating_point or dt.is_complex:
        return torch.randn(shape, dtype=dt, device=device)
    if dt == torch.bool:
        return torch.randint(0, 2, shape, device=device).bool()
    return torch.randint(0, 10, shape, dtype=dt, device=device)


def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"torch {torch.__version__} hip={torch.version.hip} cuda={torch.version.cuda} device={device}")
    cases = json.loads(pathlib.Path(__file__).with_name("cases.json").read_text())
    failures = 0
    for case in cases if isinstance(cases, list) else [cases]:
        check = shown(case.get("check", "?") if isinstance(case, dict) else "?")
        reason = refusal(case)
        if reason is not None:
            failures += 1
            print(f"{check}: refused: {reason}")
            continue
        torch.manual_seed(case.get("seed", 0))
        fn = resolve(case["op"])
        inputs = [make(s, d, "cpu") for s, d in zip(case["shapes"], case["dtypes"])]
        kwargs = case.get("kwargs", {})
        try:
            got = fn(*[x.to(device) for x in inputs], **kwargs)
            ref = fn(*[x.double() if x.is_floating_point() else x for x in inputs], **kwargs)
            if isinstance(got, torch.Tensor) and got.is_floating_point():
                err = (got.double().cpu() - ref).abs().max().item()
                print(f"{check}: {case['op']} max abs error vs CPU float64 = {err:.3g}")
            else:
                print(f"{check}: {case['op']} ran")
        except Exception as exc:  # report every case, then fail
            failures += 1
            print(f"{check}: {case['op']} raised {type(exc).__name__}: {shown(exc)}")
    raise SystemExit(1 if failures else 0)


if __name__ == "__main__":
    main()
'''


def _shown(text: object) -> str:
    """``text`` as one line of ASCII: a hostile name cannot end a comment in repro.py."""
    return ascii(str(text))[1:-1][:160]


def repro_script(refused: Sequence[tuple[str, str, object]] = ()) -> str:
    """repro.py: the rules module verbatim, then the runner; refused cases as comments, never as code."""
    rules = inspect.getsource(repro_rules).split("\nimport re\n", 1)[1]
    notes = "".join(f"# not run: {_shown(check)}: {reason} (op {_shown(op)})\n" for check, reason, op in refused)
    return _REPRO_HEAD + notes + "\nimport re\n" + rules + _REPRO_MAIN


def repro_cases(checks: Sequence[FailedCheck]) -> list[dict[str, Any]]:
    """Failing checks whose details name an allowed op with bounded inputs, shapes and dtypes normalised."""
    return _split_cases(checks)[0]


def _split_cases(checks: Sequence[FailedCheck]) -> tuple[list[dict[str, Any]], list[tuple[str, str, object]]]:
    cases, refused = [], []
    for check in checks:
        case = _case(check.details)
        if case is None:
            continue
        case = {"check": f"{check.stage}/{check.name}", **case}
        reason = repro_rules.refusal(case)
        if reason is None:
            cases.append(case)
        else:
            refused.append((case["check"], reason, case.get("op")))
    return cases, refused


def _case(details: Mapping[str, Any]) -> dict[str, Any] | None:
    """The case a check's details describe (not yet checked against the rules); None when they name no op."""
    op = details.get("op")
    if not isinstance(op, str) or not op:
        return None
    shapes = details.get("shapes", details.get("input_shapes"))
    if shapes is None and "shape" in details:
        shapes = [details["shape"]]
    if not isinstance(shapes, list) or not all(isinstance(s, list) for s in shapes):
        return None
    dtypes = details.get("dtypes")
    if dtypes is None:
        dtypes = [details.get("dtype", "float32")] * len(shapes)
    if not isinstance(dtypes, list) or len(dtypes) != len(shapes):
        return None
    case: dict[str, Any] = {
        "op": op,
        "shapes": shapes,
        "dtypes": [str(d).removeprefix("torch.") for d in dtypes],
        "seed": details.get("seed", 0),
    }
    if "kwargs" in details:
        case["kwargs"] = details["kwargs"]
    return case


def write_bundle(directory: str | Path, diagnosis: FailureDiagnosis, *, capture_environment: bool = True) -> Path:
    """Write the bundle into ``directory`` (created); every file is written atomically and redacted.

    ``capture_environment`` runs ``gatekeeper doctor --capture`` into the bundle; without it the
    bundle holds the (redacted) environment variables only.
    """
    directory = Path(directory)
    notes = [f"gatekeeper reproduction bundle: category {diagnosis.category}", ""]
    notes.append(_environment(directory, capture_environment))
    cases, refused = _split_cases(diagnosis.failed_checks)
    if cases:
        files.write_json(directory / "cases.json", cases)
        files.atomic_write(directory / "repro.py", repro_script(refused))
        notes.append(
            f"repro.py: {len(cases)} failing check(s) with recorded op/shapes/dtypes/seed; run python repro.py"
        )
    else:
        notes.append("repro.py: not written - no failing check recorded an allowed op, shapes and dtypes")
    if refused:
        notes.append(f"repro.py: {len(refused)} case(s) not run (op or inputs outside the allow-list)")
    files.atomic_write(directory / "log-excerpt.txt", redact("\n".join(diagnosis.excerpt) + "\n"))
    files.atomic_write(directory / "analysis.json", redact(json.dumps(diagnosis.to_dict(), indent=2)) + "\n")
    notes += ["log-excerpt.txt: matched lines with context and the tail of each log", "analysis.json: the diagnosis"]
    files.atomic_write(directory / "README.txt", "\n".join(notes) + "\n")
    return directory


def _environment(directory: Path, capture: bool) -> str:
    if capture:
        capture_dir = directory / "doctor-capture"
        # The child must import this same gatekeeper, installed or not (a checkout run from elsewhere).
        here = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)}
        result = proc.run(
            [sys.executable, "-m", "gatekeeper", "doctor", "--capture", str(capture_dir), "--timeout", "20"],
            timeout=DOCTOR_TIMEOUT_S,
            env=env,
        )
        # doctor exits 1 when it finds an error on this machine: still a valid capture.
        if result.returncode in (0, 1) and not result.timed_out:
            files.atomic_write(directory / "environment.txt", redact(result.stdout))
            return "environment.txt: gatekeeper doctor --capture (raw tool outputs in doctor-capture/)"
        note = f"gatekeeper doctor --capture failed ({result.describe()}); environment variables instead"
    else:
        note = "doctor --capture not requested; environment variables only"
    env = redact_env()
    files.atomic_write(directory / "environment.txt", "".join(f"{k}={v}\n" for k, v in env.items()))
    return f"environment.txt: {note}"
