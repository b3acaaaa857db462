"""The anchors of the SQL stores: every anchor a release manager set (``gatekeeper history anchor --set``),
with who and why; nothing else writes the ``anchors`` table. A mark dated after the reading job's clock is
never believed (the newest anchor wins, so one set "in 9999" would be the anchor for ever)."""

from __future__ import annotations

from gatekeeper.contract.stage_report import utc_now
from gatekeeper.core.errors import InputError
from gatekeeper.core.redact import redact_obj
from gatekeeper.history.baseline import beyond_clock
from gatekeeper.history.sql_clock import Reader, believed
from gatekeeper.history.sql_schema import AnchorMark

__all__ = ["anchors", "set_anchor"]


def anchors(store: Reader) -> list[AnchorMark]:
    """Every anchor ever set, newest first."""
    conds: list[str] = ["1 = 1"]
    args: list[object] = []
    store._scope(conds, args)
    now = store._clock()
    with store._connect() as conn:
        # appended to, not reset: the records read before the anchors keep their warnings
        believed(store, conds, args, now, "anchor", table="anchors", conn=conn)
        query = "SELECT id, run, channel, device_kind, arch, set_by, reason, set_at FROM anchors "
        query += f"WHERE {' AND '.join(conds)} ORDER BY set_at DESC, id DESC"
        rows = store._rows(query, args, conn)
    out = []
    for row in rows:
        mark = AnchorMark(*row)
        late = beyond_clock(mark.set_at, now, field="set_at")
        if late:  # the newest anchor wins: one set "in 9999" would be the anchor for ever
            store.skipped.append(f"anchor {mark.id} (run {mark.run}) in {store.where()} skipped: {late}")
            continue
        out.append(mark)
    return out


def set_anchor(store: Reader, run: str, *, by: str, reason: str, at: str | None = None) -> AnchorMark:
    """Pin ``run`` as the anchor of its channel and device from now on; the records must exist."""
    if not by.strip() or not reason.strip():
        raise InputError(None, "--by/--reason", "an anchor needs who sets it and why", "pass --by NAME --reason TEXT")
    records = store.run(run)
    if not records:
        raise InputError(
            None, "--set", f"no run {run!r} in {store.where()}",
            f"name a pipeline id or a record id ({store.label}:N) that 'gatekeeper history export' lists",
        )  # fmt: skip
    env = records[0][1].environment
    project = (records[0][0].stack or {}).get("project") or store.project
    when = at or utc_now()
    late = beyond_clock(when, store._clock(), field="set_at")
    if late:  # anchors() would never believe it (and a mark set so would win over every later one)
        raise InputError(None, "set_at", late, "set the anchor now (leave the time out)")
    insert = (
        "INSERT INTO anchors (run, channel, device_kind, arch, set_by, reason, set_at, project) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    )
    by, reason = redact_obj([by, reason])  # as every string a store writes (_row)
    with store._connect() as conn, store._transaction(conn):
        conn.execute(store._sql(insert), [run, env.channel, env.device_kind, env.arch, by, reason, when, project])
    return next(a for a in anchors(store) if a.run == run and a.set_at == when)
