"""FileStore: the stage JSON files of an earlier pipeline, in one directory."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gatekeeper.contract.stage_report import StageReport, read_artifacts, write_stage
from gatekeeper.core.errors import InputError
from gatekeeper.history.baseline import BaselineStore, RunInfo, first_comparable

__all__ = ["FileStore"]


class FileStore(BaselineStore):
    def __init__(self, directory: str | Path, *, missing_ok: bool = False) -> None:
        """``missing_ok``: a directory that does not exist yet reads as empty (evaluate's ``--baseline`` on a first
        run, as for the sqlite store; README, "Baseline and history stores"), and is not created."""
        self.directory = Path(directory)
        self.missing_ok = missing_ok

    def _reports(self) -> dict[str, StageReport]:
        if not self.directory.exists():
            if self.missing_ok:
                return {}
            raise InputError(
                self.directory, "", "baseline directory not found", "pass a directory of an earlier run's artifacts"
            )
        return read_artifacts(self.directory)

    def latest_record(
        self, stage: str, like: StageReport, *, branch: str | None = None
    ) -> tuple[RunInfo, StageReport] | None:
        """A directory is named explicitly: ``branch`` does not apply (nor a verdict: it has none)."""
        report = self._reports().get(stage)
        if report is None:
            return None
        info = RunInfo(recorded_at=report.started_at, run_id=str(self.directory / f"{stage}.json"))
        found, _reasons = first_comparable([(info, report)], like)
        return found

    def history(
        self, stage: str, *, channel: str | None = None, limit: int = 50
    ) -> Sequence[tuple[RunInfo, StageReport]]:
        report = self._reports().get(stage)
        if report is None or (channel and report.environment.channel != channel):
            return []
        return [(RunInfo(recorded_at=report.started_at), report)][:limit]

    def save(self, report: StageReport, info: RunInfo) -> None:
        write_stage(report, self.directory)
