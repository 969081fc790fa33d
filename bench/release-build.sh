# SPDX-License-Identifier: MIT
# Sourced by the benchmarks' run.sh: ROOT (the checkout) and BUILD (a release build, default
# <repo>/build-bench, made when missing), after installing what the project needs. Targets to
# build may be named in BUILD_TARGETS (default: all).
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$ROOT/build-bench}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac

"$ROOT/scripts/deps.sh"
[ -f "$BUILD/build.ninja" ] || meson setup "$BUILD" "$ROOT" -Dbuildtype=release >/dev/null
# shellcheck disable=SC2086 # a list of targets
ninja -C "$BUILD" ${BUILD_TARGETS:-} >/dev/null
