"""A real PostgreSQL server for the test session: initdb and pg_ctl in a temp directory, listening on a
free port of 127.0.0.1 with password authentication (scram-sha-256), stopped when the session ends.

The server comes from Debian's ``postgresql`` package (scripts/setup_postgres.sh, run by ``make tools``).
Without it the tests that need it skip, naming what is missing, unless GATEKEEPER_REQUIRE_TOOLS=1 (set by
.ci/run), where they fail. As root (CI here) the server runs as the ``postgres`` system user the package
creates: PostgreSQL refuses to run as root.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REQUIRED = os.environ.get("GATEKEEPER_REQUIRE_TOOLS") == "1"  # read at import: the tests' env is scrubbed
USER = "gatekeeper"
PASSWORD = "gk-test-secret-7f3a"


@dataclass(frozen=True)
class Server:
    host: str
    port: int

    def url(self, database: str, *, password: bool = False) -> str:
        secret = f":{PASSWORD}" if password else ""
        return f"postgresql://{USER}{secret}@{self.host}:{self.port}/{database}"


def _binaries() -> tuple[str, str] | None:
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if initdb and pg_ctl:
        return initdb, pg_ctl
    for bindir in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.access(f"{bindir}/initdb", os.X_OK) and os.access(f"{bindir}/pg_ctl", os.X_OK):
            return f"{bindir}/initdb", f"{bindir}/pg_ctl"
    return None


def missing() -> str | None:
    """Why no server can be started here, or None."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install -e '.[dev]')"
    if _binaries() is None:
        return "no PostgreSQL server (initdb, pg_ctl): run scripts/setup_postgres.sh"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and no postgres user to run the server as"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def require() -> None:
    """Skip (or, with GATEKEEPER_REQUIRE_TOOLS=1, fail) when no server can be started here."""
    why = missing()
    if why:
        if REQUIRED:
            pytest.fail(f"GATEKEEPER_REQUIRE_TOOLS=1 but {why}")
        pytest.skip(why)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Server]:
    require()
    bins = _binaries()
    assert bins is not None  # checked by missing()
    initdb, pg_ctl = bins
    root = Path(tempfile.mkdtemp(prefix="gk-postgres-"))
    user = None
    if os.geteuid() == 0:
        entry = pwd.getpwnam("postgres")
        user = entry.pw_name
        os.chown(root, entry.pw_uid, entry.pw_gid)
    (root / "pw").write_text(PASSWORD + "\n", encoding="utf-8")
    if user:
        os.chown(root / "pw", pwd.getpwnam(user).pw_uid, -1)
    port = _free_port()
    data, log = root / "data", root / "server.log"

    def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, user=user, capture_output=True, text=True, timeout=120, check=False)

    made = run([initdb, "-D", str(data), "-U", USER, "--pwfile", str(root / "pw"), "--auth", "scram-sha-256"])
    assert made.returncode == 0, made.stdout + made.stderr
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=60"
    started = run([pg_ctl, "-D", str(data), "-o", options, "-l", str(log), "-w", "-t", "60", "start"])
    assert started.returncode == 0, started.stdout + started.stderr + (log.read_text() if log.exists() else "")
    try:
        yield Server("127.0.0.1", port)
    finally:
        run([pg_ctl, "-D", str(data), "-m", "fast", "-w", "stop"])
        shutil.rmtree(root, ignore_errors=True)


def new_database(server: Server) -> str:
    """A fresh empty database on ``server``; its name."""
    import psycopg

    name = f"gk_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server.url("postgres", password=True), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")  # a generated identifier, not input
    return name
