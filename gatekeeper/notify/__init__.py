"""Notifications: Slack alerts, the merge-request note and commit status, and the spool.

Sending never changes the pipeline's verdict or exit code: every function here
returns 0 once its input is valid (bad input is InputError, exit 2). A message
that cannot be delivered after retries is logged (redacted) and spooled to
``<spool>/pending/`` for ``gatekeeper notify --resend``.

Where a message goes (project, merge request, commit, pipeline) and the links in
it come from the job's CI variables, never from the verdict file; a verdict that
contradicts the job (another pipeline, commit or merge request) is refused
(``alert.check_context``). The spool keeps signed data that ``resend`` renders
again and sends only to the resending job's own project (``spool``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gatekeeper.contract import schemas
from gatekeeper.contract.analysis import ANALYSIS_SCHEMA, Analysis
from gatekeeper.contract.verdict import VERDICT_SCHEMA, Verdict
from gatekeeper.core.ci_context import PipelineContext
from gatekeeper.core.errors import InputError
from gatekeeper.core.exitcodes import ExitCode
from gatekeeper.core.gitlab_api import TOKEN_VARIABLE, GitLabError, client_from_env, no_client_line
from gatekeeper.core.locking import LockTimeout, LockUnusable, locked
from gatekeeper.core.redact import redact
from gatekeeper.notify import dedupe, spool
from gatekeeper.notify.alert import Alert, Links, job_project, load_alert, severity_of
from gatekeeper.notify.gitlab_note import commit_status, note_body, publish
from gatekeeper.notify.slack import SlackSendError, SlackTarget, send
from gatekeeper.notify.slack_message import build_message

__all__ = ["entry_data", "notify_gitlab", "notify_slack", "resend"]

# Where each function's lines go: the CLI passes the terminal writer (cli/terminal.py); nothing here prints.
Log = Callable[[str], None]


def notify_slack(
    *,
    verdict: str | Path,
    analysis: str | Path | None = None,
    state: str | Path | None = None,
    spool_dir: str | Path = "alerts",
    channel: str | None = None,
    repeat_after_h: float = 24.0,
    timeout: float = 10.0,
    retries: int = 3,
    environ: Mapping[str, str] | None = None,
    now: dt.datetime | None = None,
    log: Log,
) -> int:
    env = os.environ if environ is None else environ
    now = now or dt.datetime.now(dt.timezone.utc)
    alert = load_alert(verdict, analysis, env)
    common: dict[str, Any] = {
        "spool_dir": spool_dir, "channel": channel, "repeat_after_h": repeat_after_h, "timeout": timeout,
        "retries": retries, "env": env, "now": now, "log": log,
    }  # fmt: skip
    if state is None:
        return _slack(alert, None, **common)
    # The state is read, decided on and written under one lock: concurrent jobs neither lose
    # each other's update nor both announce the same breakage.
    try:
        with locked(state, timeout_s=max(60.0, 4 * timeout * (retries + 1))):
            return _slack(alert, Path(state), **common)
    except LockTimeout as err:
        log(f"gatekeeper: notify slack: {err}; alerting without the state")
        return _slack(alert, None, **common)
    except LockUnusable as err:  # a link or a directory planted under the lock's name: set aside like a bad state
        log(f"gatekeeper: notify slack: {err.line()}; alerting without the state")
        return _slack(alert, None, **common)


def _slack(
    alert: Alert,
    state: Path | None,
    *,
    spool_dir: str | Path,
    channel: str | None,
    repeat_after_h: float,
    timeout: float,
    retries: int,
    env: Mapping[str, str],
    now: dt.datetime,
    log: Log,
) -> int:
    key = f"{alert.verdict.channel}:{alert.context.ref or '-'}:{alert.context.job_name or 'gatekeeper'}"
    current = None
    if state is not None:
        try:
            current = dedupe.load_state(state)
        except InputError as err:  # a broken state file must not cost the alert
            log(f"gatekeeper: notify slack: {err.line()}; alerting without the state (the file is left as it is)")
            state = None
    if state is not None and current is not None:
        decision = dedupe.decide(current, key, failing=alert.failing, now=now, repeat_after_s=repeat_after_h * 3600)
    else:
        decision = (
            dedupe.Decision(True, "started", "no --state: every failure alerts")
            if alert.failing
            else dedupe.Decision(False, "ok", "passing; without --state recoveries are not announced")
        )
    alerted = False
    target = SlackTarget.from_env(env, channel=channel)
    if target is None:  # said on every run (docs/notifications.md), not first when a failure's alert is lost
        now_ = "" if decision.send else f"; nothing to send this time anyway ({decision.reason})"
        log(f"gatekeeper: notify slack: not configured (set SLACK_WEBHOOK_URL, or SLACK_BOT_TOKEN and --channel){now_}")
    elif not decision.send:
        log(f"gatekeeper: notify slack: nothing sent ({decision.reason})")
    else:
        severity = severity_of(alert, recovered=decision.kind == "recovered")
        message = build_message(alert, kind=decision.kind, severity=severity)
        try:
            send(message, target, timeout=timeout, retries=retries)
            log(f"gatekeeper: notify slack: sent {decision.kind} alert ({severity}) via {target.describe()}")
        except Exception as err:  # SlackSendError, or a bug: either way the message is spooled, never lost
            target_data = {"project": job_project(env), "mr_iid": alert.context.mr_iid, "channel": target.channel}
            data = entry_data(alert, target_data, how={"kind": decision.kind, "severity": severity})
            path, signed = spool.spool(
                spool_dir, "slack", data, _describe(err), key=env.get(spool.KEY_VARIABLE), secrets=target.secrets
            )
            log(
                redact(
                    f"gatekeeper: notify slack: not delivered: {_describe(err)}; spooled to {path}{_unsigned(signed)}",
                    extra=target.secrets,
                )
            )
        alerted = True  # delivered or spooled: either way this run's alert exists
    if state is not None and current is not None:
        dedupe.save_state(state, dedupe.record(current, key, failing=alert.failing, now=now, alerted=alerted))
    return ExitCode.PASS


def _describe(err: Exception) -> str:
    if isinstance(err, (SlackSendError, GitLabError)):
        return str(err)
    return f"unexpected {type(err).__name__}: {err}"


def notify_gitlab(
    *,
    verdict: str | Path,
    analysis: str | Path | None = None,
    spool_dir: str | Path = "alerts",
    timeout: float = 20.0,
    retries: int = 3,
    environ: Mapping[str, str] | None = None,
    log: Log,
) -> int:
    env = os.environ if environ is None else environ
    alert = load_alert(verdict, analysis, env)
    client = client_from_env(env, timeout=(min(timeout, 5.0), timeout), retries=retries)
    if client is None:
        log(no_client_line("notify gitlab", "MR note or commit status"))
        return ExitCode.PASS
    project = job_project(env)
    if not project:
        log("gatekeeper: notify gitlab: CI_PROJECT_ID not set: not in a GitLab pipeline, nothing sent")
        return ExitCode.PASS
    ctx = alert.context  # the job's: the merge request, the commit (only ever this job's own) and the pipeline
    target = {"project": project, "mr_iid": ctx.mr_iid, "sha": ctx.commit, "pipeline_id": ctx.pipeline_id}
    if not target["mr_iid"] and not target["sha"]:
        log("gatekeeper: notify gitlab: no merge request and no commit SHA: nothing to post")
        return ExitCode.PASS
    try:
        for line in publish(client, _gitlab_payload(alert, target)):
            log(f"gatekeeper: notify gitlab: {line}")
    except Exception as err:  # GitLabError, or a bug: either way the message is spooled, never lost
        path, signed = spool.spool(
            spool_dir, "gitlab", entry_data(alert, target), _describe(err), key=env.get(spool.KEY_VARIABLE),
            secrets=[client.token],
        )  # fmt: skip
        log(
            redact(
                f"gatekeeper: notify gitlab: not delivered: {_describe(err)}; spooled to {path}{_unsigned(signed)}",
                extra=[client.token],
            )
        )
    return ExitCode.PASS


def _gitlab_payload(alert: Alert, target: Mapping[str, Any]) -> dict[str, Any]:
    return {**target, "note": note_body(alert), "status": commit_status(alert)}


def _unsigned(signed: bool) -> str:
    if signed:
        return ""
    return f" unsigned: {spool.KEY_VARIABLE} is not set, so notify --resend will never send it"


def entry_data(alert: Alert, target: Mapping[str, Any], how: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What the spool keeps of an alert: data to validate and render again, and where it goes."""
    return {
        "target": dict(target),
        "verdict": alert.verdict.to_dict(),
        "analysis": dict(alert.analysis) if alert.analysis is not None else None,
        "context": alert.context.to_dict(),
        "links": dataclasses.asdict(alert.links),
        "project_name": alert.project,
        **({"alert": dict(how)} if how is not None else {}),
    }


def resend(
    *,
    spool_dir: str | Path = "alerts",
    timeout: float = 10.0,
    retries: int = 3,
    environ: Mapping[str, str] | None = None,
    log: Log,
) -> int:
    """Send the pending messages whose signature verifies, rendered again, to this job's own project only.

    Without ``GATEKEEPER_SPOOL_KEY`` nothing is sent (fail closed: nothing can be verified) and the entries
    wait in ``pending/``. An unsigned, forged or changed entry, one whose data does not validate, and one for
    another project (or, in a merge request pipeline, another merge request) are quarantined."""
    env = os.environ if environ is None else environ
    key = env.get(spool.KEY_VARIABLE) or None
    entries, problems = spool.pending(spool_dir)
    for line in problems:
        log(f"gatekeeper: notify --resend: {line}")
    if key is None:
        waiting = f"{len(entries)} still pending" if entries else "0 pending"
        log(
            f"gatekeeper: notify --resend: 0 sent, {waiting}, {len(problems)} quarantined: {spool.KEY_VARIABLE} is "
            "not set, and a message is sent only when its signature can be checked"
        )
        return ExitCode.PASS
    job = PipelineContext.from_env(env)
    sent = failed = taken = 0
    for listed in entries:
        entry = spool.claim(listed)  # another process resending at the same time sends it, not us
        if entry is None:
            taken += 1
            continue
        try:
            refusal = spool.signature_problem(entry, key) or _target_problem(entry, job, env)
            if refusal is None and entry.kind == "gitlab_issue":
                alert, target = None, _entry_issue(entry)
            elif refusal is None:
                alert, target = _entry_alert(entry)
        except (InputError, ValueError, TypeError, KeyError, AttributeError) as err:
            refusal = f"data does not validate: {err}"
        if refusal is not None:
            problems.append(spool.quarantine(entry.path, refusal))
            log(f"gatekeeper: notify --resend: {problems[-1]}")
            continue
        secrets: list[str] = []
        try:
            if entry.kind == "slack" and alert is not None:
                slack_target = SlackTarget.from_env(env, channel=target.get("channel"))
                if slack_target is None:
                    raise SlackSendError("Slack is not configured (SLACK_WEBHOOK_URL or SLACK_BOT_TOKEN)")
                secrets = slack_target.secrets
                how = entry.data["alert"]
                message = build_message(alert, kind=how["kind"], severity=how["severity"])
                send(message, slack_target, timeout=timeout, retries=retries)
            else:
                client = client_from_env(env, timeout=(min(timeout, 5.0), timeout), retries=retries)
                if client is None:
                    raise GitLabError(f"{TOKEN_VARIABLE} or CI_API_V4_URL not set")
                secrets = [client.token]
                if entry.kind == "gitlab_issue":
                    from gatekeeper.notify import issue

                    issue.publish(client, {**target["issue"], "project": target["project"]})
                elif alert is not None:
                    publish(client, _gitlab_payload(alert, target))
        except (SlackSendError, GitLabError) as err:
            failed += 1
            spool.release(entry, str(err), secrets=secrets)
            log(redact(f"gatekeeper: notify --resend: {entry.path.name}: still failing: {err}", extra=secrets))
            continue
        except Exception as err:  # a bug while rendering or sending: set the entry aside, go on with the next
            problems.append(spool.quarantine(entry.path, _describe(err)))
            log(redact(f"gatekeeper: notify --resend: {problems[-1]}", extra=secrets))
            continue
        sent += 1
        spool.remove(entry)
    others = f", {taken} taken by another process" if taken else ""
    log(f"gatekeeper: notify --resend: {sent} sent, {failed} still pending, {len(problems)} quarantined{others}")
    return ExitCode.PASS


def _target_problem(entry: spool.SpoolEntry, job: PipelineContext, env: Mapping[str, str]) -> str | None:
    """Why ``entry`` is not for this job's project (or merge request); None when it is."""
    target = entry.data.get("target")
    if not isinstance(target, Mapping):
        return "data has no target"
    project, mine = target.get("project"), job_project(env)
    if entry.kind in ("gitlab", "gitlab_issue") and not mine:
        return "a GitLab message, and this job has no CI_PROJECT_ID to check it against"
    if (str(project) if project is not None else None) != mine:
        return f"for project {project!r}, this job is in project {mine!r}: refused"
    if entry.kind != "gitlab_issue" and job.mr_iid and str(target.get("mr_iid")) != job.mr_iid:
        return f"for merge request {target.get('mr_iid')!r}, this job is in merge request {job.mr_iid!r}: refused"
    return None


_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def _entry_issue(entry: spool.SpoolEntry) -> dict[str, Any]:
    """A regression issue's target and data from a (signed) entry, validated again: ValueError if not valid.
    The issue is re-rendered from this data at send time (notify/issue.py escapes and redacts it)."""
    from gatekeeper.notify.issue import payload_problem

    target, payload = entry.data.get("target"), entry.data.get("issue")
    if not isinstance(target, Mapping) or not isinstance(payload, Mapping):
        raise ValueError("an issue entry needs a target and an issue object")
    problem = payload_problem(payload)
    if problem:
        raise ValueError(problem)
    return {"project": str(target["project"]), "issue": dict(payload)}


def _entry_alert(entry: spool.SpoolEntry) -> tuple[Alert, dict[str, Any]]:
    """The alert and target a (signed) entry holds, validated again as if read from files: ValueError if not."""
    data = entry.data
    where = f"{entry.path}:data"
    target = data["target"]
    for name in ("mr_iid", "pipeline_id"):
        if target.get(name) is not None and not str(target[name]).isdigit():
            raise ValueError(f"target {name} {target[name]!r} is not a number")
    if target.get("sha") is not None and not _SHA.fullmatch(str(target["sha"])):
        raise ValueError(f"target sha {target['sha']!r} is not a commit SHA")
    if target.get("channel") is not None and not isinstance(target["channel"], str):
        raise ValueError("target channel is not a string")
    # The same schemas as read_verdict and read_analysis apply (InputError names the place).
    schemas.validate(VERDICT_SCHEMA, data["verdict"], path=f"{where}.verdict")
    verdict = Verdict.from_dict(data["verdict"])
    analysis = data.get("analysis")
    if analysis is not None:
        schemas.validate(ANALYSIS_SCHEMA, analysis, path=f"{where}.analysis")
        analysis = Analysis.from_dict(analysis).to_dict()
    context = data["context"]
    if not isinstance(context, Mapping) or not all(isinstance(v, str | bool | None) for v in context.values()):
        raise ValueError("context is not an object of strings")
    links = data["links"]
    if not isinstance(links, Mapping) or not all(
        isinstance(links.get(f.name), str | None) for f in dataclasses.fields(Links)
    ):
        raise ValueError("links is not an object of strings")
    if entry.kind == "slack":
        how = data.get("alert")
        if (
            not isinstance(how, Mapping)
            or how.get("kind") not in ("started", "repeat", "recovered")
            or how.get("severity") not in ("critical", "warning", "info")
        ):
            raise ValueError("alert kind or severity is not one notify writes")
    project = data.get("project_name")
    if not isinstance(project, str):
        raise ValueError("project_name is not a string")
    ctx = PipelineContext.from_dict(context)
    alert = Alert(
        verdict=verdict,
        context=ctx,
        links=Links(**{f.name: links.get(f.name) for f in dataclasses.fields(Links)}),
        analysis=analysis,
        project=project,
        commit=ctx.commit,
    )
    return alert, dict(target)
