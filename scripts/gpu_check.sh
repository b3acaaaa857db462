#!/bin/sh
# Every stage at GPU sizes on whatever GPU is present, then a one-page summary (what ran, what was
# measured, what was skipped and why). Without a GPU it runs the small CPU sizes and says so.
# Arguments go to `gatekeeper gpu-check` (--out DIR, --sizes auto|gpu|cpu, --model mod:fn, ...);
# exit codes as every gatekeeper command (0 pass, 1 blocked, 3 warnings).
set -eu
here="$(cd "$(dirname "$0")/.." && pwd)"
if [ -x "$here/.venv/bin/gatekeeper" ]; then
  exec "$here/.venv/bin/gatekeeper" gpu-check "$@"
fi
if command -v gatekeeper >/dev/null 2>&1; then
  exec gatekeeper gpu-check "$@"
fi
echo "gpu_check.sh: no gatekeeper command: run 'make setup' here, or pip install gatekeeper-rocm" >&2
exit 2
