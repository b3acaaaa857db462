"""``gatekeeper bisect``: from a known good and a known bad candidate to the first bad one.

The sequence: check the provider's tools and the request (bad input is one
line, exit 2, before anything runs); list the candidates; measure the good and
the bad ends (the good must measure good and the bad bad, else there is nothing
to bisect); search (``search.first_bad``), deciding each candidate with
``decide.decide``; look whether the data shows a further culprit after the
first; then write what changed and a reproduction bundle.

bisect.json is written atomically after every round and every decision, so an
interrupted run loses no finished measurement and ``--resume`` continues from
it. Progress is reported as ``Event``s to the caller (the CLI prints them).

This module holds the run (``_Bisection``: measuring, deciding, the search);
what was asked is ``request``'s, bisect.json as the run keeps it
``document``'s, and the answer it records ``result``'s.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from gatekeeper.bisect import document
from gatekeeper.bisect.decide import CommandJudge, Judge, Judgement, StageJudge, decide
from gatekeeper.bisect.measure import Measured, Runner
from gatekeeper.bisect.providers import Candidate, Prepared, Provider, Unavailable, make_provider
from gatekeeper.bisect.request import BisectOptions, load_gates, recorded_request, stage_args, validate
from gatekeeper.bisect.result import compose as compose_result
from gatekeeper.bisect.search import Found, first_bad, max_decisions
from gatekeeper.core.errors import InputError
from gatekeeper.core.exitcodes import ExitCode

__all__ = ["BisectOptions", "BisectResult", "Event", "run_bisect"]

MAX_CULPRITS = 5
EventKind = Literal["start", "step", "round", "decided", "note", "done"]


@dataclass(frozen=True)
class Event:
    kind: EventKind
    text: str
    candidate: str = ""  # label
    run: int = 0  # candidates run so far
    expected: int = 0  # ceil(log2 N) + 2
    decision: str = ""


@dataclass(frozen=True)
class BisectResult:
    path: Path  # bisect.json
    doc: dict[str, Any]
    exit_code: int


class _Bisection:
    """The state of one run: the document, the measurements, the prepared environments."""

    def __init__(self, opts: BisectOptions, emit: Callable[[Event], None]) -> None:
        self.opts = opts
        self.emit = emit
        self.out = Path(opts.out).resolve()
        self.path = self.out / "bisect.json"
        self.provider: Provider = make_provider(
            opts.provider, opts.provider_options, stage_mode=bool(opts.stage), repo=opts.repo
        )
        self.prepared: dict[int, Prepared] = {}
        self.measured: dict[int, Measured] = {}
        self.reused = 0
        self.workdir: Path | None = None
        self.runner = Runner(
            out=self.out,
            stage=opts.stage,
            stage_args=stage_args(opts),
            command=opts.command,
            metric=opts.metric,
            timeout=opts.timeout,
        )
        self.doc: dict[str, Any] = {}
        self.cands: list[Candidate] = []
        self.judge: Judge = CommandJudge([])
        self.ref = 0
        self.step = 0

    # ------------------------------------------------------------------ document

    def start(self) -> None:
        validate(self.opts)
        self.provider.check_tools()
        gates_file, gates_sha, stage_judge = load_gates(self.opts)
        if stage_judge is not None:
            self.judge = stage_judge
        request = recorded_request(self.opts, self.provider.options(), gates_file, gates_sha)
        if self.opts.resume:
            self.resume(request)
        else:
            document.ensure_new(self.path)
            self.cands = self.provider.candidates(self.opts.good, self.opts.bad)
            self.doc = document.new_document(request, self.cands)
            self.save()
        labels = [c.label for c in self.cands]
        if isinstance(self.judge, StageJudge):
            self.judge.labels = labels
        else:
            self.judge = CommandJudge(labels)

    def resume(self, request: dict[str, Any]) -> None:
        doc = document.reopen(self.path, request)
        self.doc = doc
        self.cands = document.candidates_of(doc)
        for c in doc["candidates"]:
            if c["rounds"]:
                m = Measured(c["index"], list(c["rounds"]), [self.runner.reload(r) for r in c["rounds"]])
                self.measured[c["index"]] = m
                self.reused += len(c["rounds"])
        doc["status"] = "running"
        doc["result"] = None
        self.emit(Event("note", f"resuming {self.path}: {self.reused} finished round(s) are reused, not run again"))

    def save(self) -> None:
        document.save(self.path, self.doc, reused=self.reused)

    def entry(self, i: int) -> dict[str, Any]:
        return self.doc["candidates"][i]

    def run_count(self) -> int:
        return document.run_count(self.doc)

    # ------------------------------------------------------------------ measuring

    def env(self, i: int) -> Prepared:
        if i in self.prepared:
            return self.prepared[i]
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="gatekeeper-bisect-"))
        self.emit(Event("round", f"{self.cands[i].label}: preparing", self.cands[i].label, self.step))
        prepared = self.provider.prepare(self.cands[i], self.workdir)
        self.prepared[i] = prepared
        self.entry(i)["facts"] = prepared.facts
        return prepared

    def release(self, i: int) -> None:
        if i in (0, len(self.cands) - 1, self.ref) or i not in self.prepared:
            return
        with contextlib.suppress(Exception):  # cleanup is best effort: the work directory goes at the end anyway
            self.provider.cleanup(self.prepared.pop(i))

    def add_round(self, m: Measured) -> None:
        k = len(m.rounds) + 1
        cand = self.cands[m.index]
        prepared = self.env(m.index)
        done = f" ({m.processes()} processes so far)" if m.rounds else ""
        self.emit(Event("round", f"{cand.label}: round {k}{done}", cand.label, self.step))
        record, report = self.runner.run(prepared, k)
        m.rounds.append(record)
        m.reports.append(report)
        entry = self.entry(m.index)
        entry["rounds"] = list(m.rounds)
        entry["state"] = "measured"
        self.save()

    def ensure(self, i: int) -> Measured | None:
        """The candidate measured at least once; None when it cannot be prepared (skipped and named)."""
        if i in self.measured:
            return self.measured[i]
        entry = self.entry(i)
        if entry["state"] == "unavailable":
            return None
        self.step = self.run_count() + 1
        self.emit(Event("step", f"candidate {self.cands[i].label}", self.cands[i].label, self.step))
        m = Measured(i)
        try:
            self.add_round(m)
        except Unavailable as why:
            entry["state"] = "unavailable"
            entry["unavailable"] = str(why)[:500]
            self.save()
            self.emit(Event("note", f"skipped {self.cands[i].label}: {why}", self.cands[i].label, self.run_count()))
            return None
        self.measured[i] = m
        return m

    def record_decision(self, i: int, ref: int | None, j: Judgement) -> None:
        """Keep ``j`` as candidate ``i``'s decision against ``ref`` (one per reference) until the next save."""
        recorded_ref = None if isinstance(self.judge, CommandJudge) else ref
        document.keep_decision(self.entry(i), recorded_ref, j)

    def recorded(self, i: int, ref: int | None) -> dict[str, Any] | None:
        """Candidate ``i``'s recorded decision against ``ref`` (from bisect.json on ``--resume``), if it has looks."""
        recorded_ref = None if isinstance(self.judge, CommandJudge) else ref
        m = self.measured[i]
        reference = self.measured[ref] if ref is not None and recorded_ref is not None else None
        reference_rounds = len(reference.rounds) if reference is not None else 0
        return document.recorded_decision(self.entry(i), recorded_ref, len(m.rounds), reference_rounds)

    def decide(self, i: int, ref: int | None) -> Judgement:
        m = self.measured[i]
        reference = self.measured[ref] if ref is not None else None
        prior = self.recorded(i, ref) if self.opts.resume else None
        if prior is not None and prior["decision"] in ("good", "bad"):
            # Decided before the interruption: the same decision, not a new look at grown data (which would be
            # a second chance, and a resumed bisection must follow the same path as an uninterrupted one).
            j = document.replay(prior)
            self.announce(i, j, f"recorded: {j.reason}")
            return j
        earlier = [(int(a), int(b)) for a, b in prior["looks"]] if prior is not None else []
        try:
            j = decide(
                m,
                reference,
                judge=self.judge,
                add_round=self.add_round,
                max_processes=self.opts.max_processes,
                looks=earlier,
                on_look=lambda pending: self.record_decision(i, ref, pending),
            )
        except InputError:
            if not isinstance(self.judge, CommandJudge) or not m.rounds:
                raise
            # The last round stopped the bisection (a command killed by a signal, timed out or above 127): it
            # decided nothing, so it is not kept as a measurement; --resume runs it again. Its output stays on disk.
            m.rounds.pop()
            m.reports.pop()
            self.entry(i)["rounds"] = list(m.rounds)
            self.entry(i)["state"] = "measured" if m.rounds else "untried"
            if not m.rounds:
                self.measured.pop(i, None)
            self.save()
            raise
        self.record_decision(i, ref, j)
        self.save()
        self.announce(i, j, j.reason)
        return j

    def announce(self, i: int, j: Judgement, why: str) -> None:
        label = self.cands[i].label
        self.emit(Event("decided", f"{label}: {j.decision} ({why})", label, self.run_count(), decision=j.decision))

    def at(self, i: int) -> str:
        """The search's question: is candidate ``i`` good or bad (against the current reference)?"""
        m = self.ensure(i)
        if m is None:
            return "skip"
        decision = self.decide(i, self.ref).decision
        self.release(i)
        return decision

    # ------------------------------------------------------------------ the run

    def endpoints(self) -> None:
        good, bad = 0, len(self.cands) - 1
        label_g, label_b = self.cands[good].label, self.cands[bad].label
        self.ensure_endpoint(good, "--good")
        if isinstance(self.judge, StageJudge):
            own = self.judge.own_failures(self.measured[good])
            if self.measured[good].report() is None or own:
                why = f"{', '.join(sorted(own))} fail on it alone" if own else self.decide(good, good).reason
                raise InputError(
                    None,
                    "--good",
                    f"{label_g} measures bad ({why})",
                    "pick an older --good, or the metric that regressed with --metric",
                )
            # The reference itself: no comparison to make (against itself it is neither better nor worse).
            reference = Judgement(
                "good", "the reference: no gate fails on it alone", processes=self.measured[good].processes()
            )
            self.entry(good)["decisions"] = [reference.record(good)]
            self.save()
            self.announce(good, reference, reference.reason)
        else:
            j = self.decide(good, None)
            if j.decision != "good":
                raise InputError(
                    None, "--good", f"{label_g} measures {j.decision} ({j.reason})", "pick an older --good"
                )
        self.ensure_endpoint(bad, "--bad")
        j = self.decide(bad, good)
        if j.decision == "good":
            raise InputError(
                None,
                "--bad",
                f"{label_b} measures good against {label_g} ({j.reason}): nothing to bisect",
                "check --bad, the stage options, or --metric",
            )
        if j.decision != "bad":
            raise InputError(
                None,
                "--bad",
                f"whether {label_b} is bad could not be decided ({j.reason})",
                "make the command test --bad (exit 0 good, 1-127 bad), or pick a --bad it can test"
                if j.decision == "skip"
                else "raise --max-processes, or steady the machine (docs/performance.md)",
            )

    def ensure_endpoint(self, i: int, option: str) -> None:
        if self.ensure(i) is None:
            raise InputError(
                None,
                option,
                f"{self.cands[i].label} cannot be prepared: {self.entry(i)['unavailable']}",
                "fix the environment, or pick another endpoint",
            )

    def search(self) -> list[Found]:
        bad = len(self.cands) - 1
        self.ref = 0
        found: list[Found] = []
        while len(found) < MAX_CULPRITS:
            f = first_bad(self.ref, bad, self.at)
            found.append(f)
            if f.first_bad == bad or not isinstance(self.judge, StageJudge):
                break
            if self.measured[f.first_bad].report() is None:
                break  # its stage wrote no result: nothing later can be judged against it
            # A further culprit only where the data already shows one: the bad end against the first bad
            # candidate, with what both have measured (no processes are added to look for it).
            m_bad, m_first = self.measured[bad], self.measured[f.first_bad]
            again = self.judge(m_bad, m_first)
            if again.decision != "bad":
                self.emit(
                    Event(
                        "note",
                        f"{self.cands[bad].label} is not worse than {self.cands[f.first_bad].label} "
                        f"({again.decision}): one culprit",
                    )
                )
                break
            self.emit(
                Event(
                    "note",
                    f"{self.cands[bad].label} is worse than {self.cands[f.first_bad].label} too "
                    f"({again.reason}): looking for a further culprit after it",
                )
            )
            self.ref = f.first_bad
        return found

    def finish(self, found: list[Found]) -> int:
        first = found[0]
        report = self.measured[first.first_bad].report() if first.first_bad in self.measured else None
        result = compose_result(
            found,
            opts=self.opts,
            cands=self.cands,
            entries=self.doc["candidates"],
            provider=self.provider,
            report=report,
            run=self.run_count(),
        )
        self.doc["result"] = result
        if self.opts.bundle:
            from gatekeeper.bisect.bundle import write_repro_bundle

            where = write_repro_bundle(self.out / "repro", bisection=self, found=first)
            result["repro_bundle"] = where.relative_to(self.out).as_posix()
        self.doc["status"] = "done"
        self.save()
        return ExitCode.PASS if all(f.exact for f in found) else ExitCode.WARN

    def close(self) -> None:
        for prepared in list(self.prepared.values()):
            with contextlib.suppress(Exception):
                self.provider.cleanup(prepared)
        self.prepared.clear()
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)


def run_bisect(opts: BisectOptions, on_event: Callable[[Event], None] | None = None) -> BisectResult:
    """Run (or ``--resume``) a bisection; ``on_event`` receives progress (the CLI prints it)."""
    emit = on_event or (lambda _e: None)
    b = _Bisection(opts, emit)
    b.start()
    n = len(b.cands)
    emit(
        Event(
            "start",
            f"bisect {opts.provider}: {n} candidates from {b.cands[0].label} to {b.cands[-1].label}, "
            f"expect at most {max_decisions(n)} to run",
            expected=max_decisions(n),
        )
    )
    try:
        b.endpoints()
        found = b.search()
        code = b.finish(found)
    finally:
        b.close()
    emit(Event("done", b.doc["result"]["note"], run=b.run_count(), expected=max_decisions(n)))
    return BisectResult(b.path, b.doc, int(code))
