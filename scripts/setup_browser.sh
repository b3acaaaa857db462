#!/bin/sh
# Install headless Chromium for tests/test_report_browser.py (Debian/Ubuntu system package).
# Idempotent: does nothing when a chromium binary is already on PATH.
set -eu
for name in chromium chromium-browser google-chrome; do
    if command -v "$name" >/dev/null 2>&1; then
        echo "setup_browser: $name already installed: $(command -v "$name")"
        exit 0
    fi
done
if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup_browser: no apt-get here; install Chromium with your system's package manager" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# fonts-dejavu-core: text in the screenshot renders with a real font instead of boxes.
$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core
echo "setup_browser: installed $(command -v chromium)"
