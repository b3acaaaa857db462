#!/usr/bin/env bash
# Installs what the pipeline tests (tests/pipelines/) need to run GitLab CI
# pipelines on this machine: Node.js 22+ (the `node` npm package ships the
# binary, so no download outside the npm registry), gitlab-ci-local, and rsync
# (gitlab-ci-local's --shell-isolation copies the project with it).
#
# Idempotent: a second run finds everything in place and returns in a second.
# Everything from npm goes into one project-local prefix ($GATEKEEPER_CI_TOOLS,
# default .ci-tools/ at the repository root, git-ignored).
#
# Never fails the whole CI: a tool that cannot be installed is reported with a
# clear message and the script exits 0; the pipeline tests then skip, naming
# the missing tool. Pass --strict to exit 1 instead.
#
# Usage:  bash scripts/setup_ci_tools.sh [--strict]
#         export PATH="$(bash scripts/setup_ci_tools.sh --print-path):$PATH"
set -u

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PREFIX="${GATEKEEPER_CI_TOOLS:-$ROOT/.ci-tools}"
BIN="$PREFIX/node_modules/.bin"
NODE_SPEC="${GATEKEEPER_NODE_SPEC:-node@22}"
GCL_SPEC="${GATEKEEPER_GCL_SPEC:-gitlab-ci-local@4}"
STRICT=0

case "${1:-}" in
  --print-path) echo "$BIN"; exit 0 ;;
  --strict) STRICT=1 ;;
  "") ;;
  *) echo "usage: $0 [--strict|--print-path]" >&2; exit 2 ;;
esac

missing=()
say() { echo "setup_ci_tools: $*"; }

node_major() { "$BIN/node" -e 'process.stdout.write(process.versions.node.split(".")[0])' 2>/dev/null; }

# rsync from the system packages.
if ! command -v rsync >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    say "installing rsync with apt-get"
    (timeout 300 apt-get update -qq >/dev/null 2>&1 || true)
    timeout 300 env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rsync >/dev/null 2>&1 \
      || say "apt-get install rsync failed"
  fi
  command -v rsync >/dev/null 2>&1 || missing+=("rsync (apt-get install rsync)")
fi

# npm itself: images without Node (python:3.11) get Debian's npm, whose older
# node is only used to fetch node@22 from the npm registry below.
if ! command -v npm >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  say "installing npm with apt-get"
  (timeout 300 apt-get update -qq >/dev/null 2>&1 || true)
  timeout 600 env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null 2>&1 \
    || say "apt-get install npm failed"
fi

# Node 22+ and gitlab-ci-local into the project-local prefix.
if ! command -v npm >/dev/null 2>&1; then
  missing+=("npm (needed to install node@22 and gitlab-ci-local)")
else
  mkdir -p "$PREFIX"
  [ -f "$PREFIX/package.json" ] || echo '{"name":"gatekeeper-ci-tools","private":true}' > "$PREFIX/package.json"
  major="$(node_major || true)"
  if [ -z "$major" ] || [ "$major" -lt 22 ] || [ ! -x "$BIN/gitlab-ci-local" ]; then
    say "installing $NODE_SPEC and $GCL_SPEC into $PREFIX"
    for attempt in 1 2; do
      if timeout 600 npm install --prefix "$PREFIX" --no-audit --no-fund --loglevel=error \
          "$NODE_SPEC" "$GCL_SPEC" >"$PREFIX/npm-install.log" 2>&1; then
        break
      fi
      say "npm install failed (attempt $attempt), see $PREFIX/npm-install.log:"
      tail -n 5 "$PREFIX/npm-install.log" | sed 's/^/  /'
    done
  fi
  major="$(node_major || true)"
  if [ -z "$major" ] || [ "$major" -lt 22 ]; then
    missing+=("node 22+ ($NODE_SPEC from the npm registry)")
  elif ! PATH="$BIN:$PATH" "$BIN/gitlab-ci-local" --version >/dev/null 2>&1; then
    missing+=("gitlab-ci-local ($GCL_SPEC)")
  fi
fi

if [ "${#missing[@]}" -eq 0 ]; then
  say "ready: node $("$BIN/node" --version), gitlab-ci-local $(PATH="$BIN:$PATH" "$BIN/gitlab-ci-local" --version), $(rsync --version | head -n1)"
  say "put $BIN first on PATH (tests/pipelines finds it there by itself)"
  exit 0
fi
for m in "${missing[@]}"; do say "MISSING: $m; the pipeline tests will be skipped"; done
[ "$STRICT" = 1 ] && exit 1
exit 0
