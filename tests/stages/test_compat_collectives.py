from __future__ import annotations

from pathlib import Path

import pytest

from gatekeeper.core.errors import InputError
from gatekeeper.core.proc import ProcResult
from stages.compat import collectives
from stages.compat.collectives import COLLECTIVES, parse_plant, run_collectives
from stages.compat.rank import WATCHDOG_EXIT, _sizes


def test_parse_plant() -> None:
    assert parse_plant(None, 2) == ""
    assert parse_plant(" 1:all_gather", 2) == "1:all_gather"
    for bad in ("1", "x:all_reduce", "1:allreduce", "2:barrier", "-1:barrier"):
        with pytest.raises(InputError) as err:
            parse_plant(bad, 2)
        assert "--plant-deadlock" in err.value.line()


def test_sizes_reach_the_maximum() -> None:
    assert _sizes(64) == [1024, 262144, 16 << 20]  # float32 elements: 4 KiB, 1 MiB, 64 MiB
    assert _sizes(1) == [1024, 262144]
    assert max(_sizes(0.001)) == 262


@pytest.mark.slow
def test_every_collective_passes_on_gloo(tmp_path: Path) -> None:
    run = run_collectives(world_size=2, backend="gloo", max_mb=1, timeout=20, workdir=tmp_path)
    assert [r.name for r in run.results] == list(COLLECTIVES)
    assert {r.status for r in run.results} == {"passed"}, [r.message for r in run.results]
    assert run.pass_rate() == 1.0
    assert run.deadlocks == 0
    assert run.processes_left == 0
    timings = run.results[0].details["timings"]
    assert len(timings) == 2  # one list per rank
    assert {t["bytes"] for t in timings[0]} == {4096, 1 << 20}


@pytest.mark.slow
def test_missing_rank_zero_is_named_and_every_process_ends(tmp_path: Path) -> None:
    # rank 0 hosts the store and answers monitored_barrier: the others must still name it
    run = run_collectives(world_size=2, backend="gloo", max_mb=0.01, timeout=3, workdir=tmp_path, plant="0:barrier")
    by = {r.name: r for r in run.results}
    assert by["barrier"].status == "failed"
    assert by["barrier"].deadlock
    assert "rank 0 never joined barrier" in by["barrier"].message
    assert "never joined barrier within 3 s (detected after " in by["barrier"].message  # by the 3 s timeout
    assert by["barrier"].details["detected_after_s"] > 0
    assert run.deadlocks == 1
    assert run.pass_rate() == 0.8
    assert run.processes_left == 0
    assert any("watchdog" in e for e in run.rank_exits)


# The interpretation of event files, without processes.


def _ev(rank: int, event: str, coll: str = "", t: float = 0.0, **kw) -> dict:
    return {"t": t, "rank": rank, "event": event, "collective": coll, **kw}


def _done(rank: int, upto: int) -> list[dict]:
    evs = [_ev(rank, "start", pid=0), _ev(rank, "init_ok")]
    for c in COLLECTIVES[:upto]:
        evs += [_ev(rank, "enter", c), _ev(rank, "arrive", c), _ev(rank, "joined", c)]
        evs.append(_ev(rank, "pass", c, timings=[{"bytes": 4096, "seconds": 0.01}], seconds=0.01))
    return evs


def _exit(code: int | None, stderr: str = "", timed_out: bool = False) -> ProcResult:
    return ProcResult(("python",), code, "", stderr, timed_out, 1.0)


def test_wrong_results_fail_without_a_deadlock() -> None:
    events = [_done(0, 5), _done(1, 5)]
    events[1][-1 - 4 * 2] = _ev(1, "fail", "broadcast", message="3 of 1024 elements wrong on rank 1")
    results = collectives._interpret(events, [_exit(0), _exit(0)], 5)
    by = {r.name: r for r in results}
    assert by["broadcast"].status == "failed"
    assert "3 of 1024 elements wrong on rank 1" in by["broadcast"].message
    assert not any(r.deadlock for r in results)
    assert by["barrier"].status == "passed"


def test_unsupported_collective_is_skipped_with_the_reason() -> None:
    events = [_done(0, 5), _done(1, 5)]
    for r in (0, 1):
        idx = next(i for i, e in enumerate(events[r]) if e["event"] == "pass" and e["collective"] == "reduce_scatter")
        events[r][idx] = _ev(r, "skip", "reduce_scatter", message="gloo: RuntimeError: reduce_scatter not supported")
    by = {r.name: r for r in collectives._interpret(events, [_exit(0), _exit(0)], 5)}
    assert by["reduce_scatter"].status == "skipped"
    assert "not supported" in by["reduce_scatter"].message


def test_a_crashed_rank_is_a_failure_not_a_deadlock() -> None:
    events = [[*_done(0, 1), _ev(0, "enter", "all_gather"), _ev(0, "arrive", "all_gather")], _done(1, 1)]
    events[0].append(_ev(0, "error", "all_gather", message="RuntimeError: Connection closed by peer", timeout=False))
    exits = [_exit(1), _exit(-11, "Segmentation fault")]
    by = {r.name: r for r in collectives._interpret(events, exits, 5)}
    assert by["all_gather"].status == "failed"
    assert not by["all_gather"].deadlock
    assert "rank 1 killed by SIGSEGV" in by["all_gather"].message


def test_a_rank_that_never_starts_fails_init() -> None:
    events = [[_ev(0, "start", pid=0), _ev(0, "watchdog", "init_process_group")], []]
    exits = [_exit(WATCHDOG_EXIT), _exit(1, "ModuleNotFoundError: No module named 'torch'")]
    results = collectives._interpret(events, exits, 5)
    assert results[0].status == "failed"
    assert "did not join the process group" in results[0].message
    assert "ranks 0, 1" in results[0].message
    assert results[0].deadlock
    assert {r.status for r in results[1:]} == {"skipped"}
