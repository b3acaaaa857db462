"""The merge-request note (one per MR, updated in place) and the commit status.

The note carries a hidden marker; each pipeline finds *our* note with the marker
(written by the token's own user, from ``GET /user``: anyone can plant the
marker in a note of theirs) and edits it, so the MR shows the latest verdict
instead of one note per run. When the edit fails, a new note is posted, and the
commit status is posted either way. A pipeline-id marker makes the POST
idempotent: after a timeout, the notes are listed before posting again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gatekeeper.core.escape import md_code_block, md_code_span, md_link, md_text, terminal
from gatekeeper.core.gitlab_api import RETRY_STATUSES, GitLabClient, GitLabError
from gatekeeper.evaluate.outputs import no_gpu_line, to_markdown
from gatekeeper.notify.alert import Alert

__all__ = ["MARKER", "STATUS_NAME", "commit_status", "note_body", "pipeline_marker", "publish"]

MARKER = "<!-- gatekeeper:verdict -->"
STATUS_NAME = "gatekeeper/gates"
_STATE = {"pass": "success", "warn": "success", "blocked": "failed", "error": "failed"}  # not a password  # nosec B105


def note_body(alert: Alert) -> str:
    parts = [MARKER + pipeline_marker(alert.context.pipeline_id), to_markdown(alert.verdict)]
    if alert.analysis:
        parts.append(_analysis_md(alert.analysis))
    links = " · ".join(md_link(url, name) for name, url in alert.links.items())
    if links:
        parts.append(links)
    return "\n".join(parts) + "\n"


def _analysis_md(a: Mapping[str, Any]) -> str:
    known = f"known issue {md_code_span(a['known_issue'])}" if a.get("known_issue") else "no known issue matched"
    if a.get("decided_by") == "artifacts":
        known = "from the artifacts"
    category = md_code_span(str(a.get("category")))
    lines = [
        f"### Failure analysis: {category} ({known}, confidence {a.get('confidence', 0):.2f})",
        "",
    ]
    if a.get("failing"):
        lines += [f"**Failing check:** {md_text(str(a['failing']))}", ""]
    lines += [md_text(str(a.get("explanation", ""))), ""]
    lines += [f"{i}. {md_text(step)}" for i, step in enumerate(a.get("remediation", []), 1)]
    matches = a.get("matches") or []
    if matches:
        evidence = [f"{m.get('source')}:{m.get('line')}: {m.get('text')}" for m in matches[:5]]
        lines += ["", md_code_block(evidence)]
    return "\n".join(lines) + "\n"


def commit_status(alert: Alert) -> dict[str, Any]:
    v = alert.verdict
    status: dict[str, Any] = {
        "state": _STATE.get(v.result, "failed"),
        "name": STATUS_NAME,
        "description": " ".join(
            terminal((f"{no_gpu_line(v)} " if not v.gpu_verified else "") + v.summary, newlines=False).split()
        )[:250],
    }
    if alert.links.pipeline:
        status["target_url"] = alert.links.pipeline
    if alert.context.ref:
        status["ref"] = alert.context.ref
    return status


def pipeline_marker(pipeline_id: object) -> str:
    """The idempotency marker: one note per pipeline, however often its POST is retried."""
    return f"<!-- gatekeeper:pipeline={int(str(pipeline_id))} -->" if str(pipeline_id or "").isdigit() else ""


def _whoami(client: GitLabClient) -> int | None:
    """The token's user id (a project access token has a bot user); None when GitLab will not say."""
    try:
        me = client.request("GET", "/user")
    except GitLabError:
        return None
    return me.get("id") if isinstance(me, dict) and isinstance(me.get("id"), int) else None


def _author(note: Mapping[str, Any]) -> object:
    author = note.get("author")
    return author.get("id") if isinstance(author, Mapping) else None


def _mine(notes: list[Any], me: int | None, body_has: str, body: str) -> Mapping[str, Any] | None:
    """Our note carrying ``body_has``: written by the token's user (or, when GitLab would not say who we
    are, one whose body is exactly ours, so a planted note is never taken for ours)."""
    for note in notes:
        if not isinstance(note, Mapping) or body_has not in str(note.get("body") or ""):
            continue
        if (me is not None and _author(note) == me) or (me is None and note.get("body") == body):
            return note
    return None


def _create(client: GitLabClient, notes_path: str, body: str, me: int | None, marker: str) -> str:
    """POST the note once: after a timeout or 5xx, look for it before posting again (it may have landed)."""
    last = GitLabError(f"GitLab POST {notes_path}: no attempt made")
    for attempt in range(client.retries + 1):
        if attempt:
            client.sleep(client.backoff_s * (2 ** (attempt - 1)))
        try:
            created = client.request("POST", notes_path, json={"body": body}, retries=0)
            return f"created note {created.get('id') if isinstance(created, dict) else '?'}"
        except GitLabError as err:
            if err.status is not None and err.status not in RETRY_STATUSES:
                raise
            last = err
        if marker:
            try:
                landed = _mine(client.paged(notes_path, params={"sort": "desc"}), me, marker, body)
            except GitLabError:
                landed = None
            if landed is not None:
                return f"created note {landed.get('id')} (found after the POST timed out)"
    raise last


def _upsert_note(client: GitLabClient, project: str, payload: Mapping[str, Any]) -> str:
    notes_path = f"{project}/merge_requests/{payload['mr_iid']}/notes"
    body = payload["note"]
    me = _whoami(client)
    notes = client.paged(notes_path, params={"sort": "desc", "order_by": "updated_at"})
    # Only a note the token's own user wrote: anyone can post a note with our marker in it.
    ours = _mine(notes, me, MARKER, body) if me is not None else None
    prefix = ""
    if ours is not None:
        try:
            client.request("PUT", f"{notes_path}/{ours['id']}", json={"body": body})
            return f"updated note {ours['id']} on !{payload['mr_iid']}"
        except GitLabError as err:
            prefix = f"could not update note {ours['id']} ({err}); "
    marker = pipeline_marker(payload.get("pipeline_id"))
    return prefix + f"{_create(client, notes_path, body, me, marker)} on !{payload['mr_iid']}"


def publish(client: GitLabClient, payload: Mapping[str, Any]) -> list[str]:
    """Post or update the MR note and set the commit status; what was done, one line each.

    ``payload``: project, mr_iid (or None), sha (or None), note (markdown), status (dict),
    pipeline_id (or None). The commit status is posted even when the note fails.
    Raises GitLabError (redacted) when a call fails after its retries, naming what was done.
    """
    done: list[str] = []
    failed: list[GitLabError] = []
    project = client.project_path(payload["project"])
    if payload.get("mr_iid"):
        try:
            done.append(_upsert_note(client, project, payload))
        except GitLabError as err:
            failed.append(err)
    if payload.get("sha"):
        try:
            client.request("POST", f"{project}/statuses/{payload['sha']}", json=payload["status"])
            done.append(f"commit status {payload['status']['state']} on {payload['sha'][:12]}")
        except GitLabError as err:
            failed.append(err)
    if failed:
        also = f" (done: {'; '.join(done)})" if done else ""
        raise GitLabError("; ".join(str(e) for e in failed) + also, failed[0].status)
    return done
