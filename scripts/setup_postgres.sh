#!/bin/sh
# Install the PostgreSQL server for the postgresql: history store tests (tests/history/): Debian's
# `postgresql` package. The tests start their own server for the session (initdb and pg_ctl in a temp
# directory, on a free local port): no system service is started or needed.
# Idempotent: does nothing when an initdb binary is already there.
set -eu
find_initdb() {
    command -v initdb 2>/dev/null && return 0
    for bin in /usr/lib/postgresql/*/bin/initdb; do
        [ -x "$bin" ] && { echo "$bin"; return 0; }
    done
    return 1
}
if found="$(find_initdb)"; then
    echo "setup_postgres: PostgreSQL already installed: $found"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup_postgres: no apt-get here; install the PostgreSQL server (initdb, pg_ctl) with your system's package manager" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends postgresql
echo "setup_postgres: installed $(find_initdb)"
