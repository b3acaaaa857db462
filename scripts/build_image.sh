#!/bin/sh
# Build (and with --push, push) the OCI image of gatekeeper from the wheel in dist/.
#
#   sh scripts/build_image.sh cpu  REPOSITORY [--push]   -> REPOSITORY/cpu:<version>
#   sh scripts/build_image.sh rocm REPOSITORY [--push]   -> REPOSITORY/rocm:<version>-rocm<major.minor>
#
# <version> is gatekeeper's own (gatekeeper/__init__.py), the version the component of
# the same release pins. The ROCm tag is read from the built image (/opt/rocm/.info/version),
# never typed by hand. The base of the ROCm image: $ROCM_BASE_IMAGE (default rocm/pytorch:latest).
# Uses docker, else podman; with neither (or no daemon) it says so and exits 0 ("skipped").
set -eu
cd "$(dirname "$0")/.."
kind="${1:-}"
repo="${2:-}"
push="${3:-}"
case "$kind" in cpu|rocm) ;; *) echo "usage: $0 cpu|rocm REPOSITORY [--push]" >&2; exit 2 ;; esac
[ -n "$repo" ] || { echo "usage: $0 cpu|rocm REPOSITORY [--push]" >&2; exit 2; }

tool=""
for candidate in docker podman; do
  if command -v "$candidate" >/dev/null 2>&1; then tool="$candidate"; break; fi
done
if [ -z "$tool" ]; then
  echo "build_image: skipped: no docker/podman on PATH"
  exit 0
fi
if ! timeout 30 "$tool" info >/dev/null 2>&1; then
  echo "build_image: skipped: $tool is installed but does not answer ($tool info failed: is its daemon running?)"
  exit 0
fi

version="$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' gatekeeper/__init__.py)"
wheel="dist/gatekeeper_rocm-$version-py3-none-any.whl"
[ -f "$wheel" ] || { echo "build_image: $wheel not found: run make dist first" >&2; exit 2; }

if [ "$kind" = cpu ]; then
  tag="$repo/cpu:$version"
  "$tool" build -f docker/cpu.Dockerfile --build-arg "WHEEL=$wheel" -t "$tag" .
else
  base="${ROCM_BASE_IMAGE:-rocm/pytorch:latest}"
  build_tag="$repo/rocm:$version-build"
  "$tool" build -f docker/rocm.Dockerfile --build-arg "BASE=$base" --build-arg "WHEEL=$wheel" -t "$build_tag" .
  rocm="$("$tool" run --rm "$build_tag" cat /opt/rocm/.info/version | sed -n 's/^\([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p')"
  [ -n "$rocm" ] || { echo "build_image: no /opt/rocm/.info/version in $base: not a ROCm image" >&2; exit 2; }
  tag="$repo/rocm:$version-rocm$rocm"
  "$tool" tag "$build_tag" "$tag"
fi
# The image must run the gatekeeper of this version (the component checks the same).
found="$("$tool" run --rm "$tag" gatekeeper --version)"
[ "$found" = "gatekeeper $version" ] || { echo "build_image: $tag runs '$found', not gatekeeper $version" >&2; exit 1; }
echo "build_image: built $tag"
if [ "$push" = --push ]; then
  "$tool" push "$tag"
  echo "build_image: pushed $tag"
fi
