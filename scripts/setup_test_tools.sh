#!/usr/bin/env bash
# Tools some tests drive from outside Python (headless Chromium for the report,
# gitlab-ci-local for the pipeline tests, the PostgreSQL server for the postgresql:
# history store tests). Idempotent; each installer says
# clearly what it could not do. Tests that need a missing tool skip with the
# reason, unless GATEKEEPER_REQUIRE_TOOLS=1 (set by .ci/run), where they fail.
set -u
cd "$(dirname "$0")/.."
status=0
for installer in scripts/setup_browser.sh scripts/setup_ci_tools.sh scripts/setup_postgres.sh; do
  if [ -f "$installer" ]; then
    bash "$installer" || { echo "setup_test_tools: $installer failed (see above)" >&2; status=1; }
  fi
done
if [ "$status" -ne 0 ] && [ "${GATEKEEPER_REQUIRE_TOOLS:-0}" != "1" ]; then
  echo "setup_test_tools: the tests that need the missing tools will be skipped, each with the reason" >&2
  exit 0
fi
exit $status
