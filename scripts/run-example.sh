#!/usr/bin/env bash
# Installs the dependencies, builds tapegrad (Release, in build/) and runs the main example:
# examples/xor_mlp, a 2-8-1 MLP trained on XOR by gradient descent, which prints its loss as it
# trains and its final predictions. Arguments are passed to the example: [steps] [seed].
# Environment: BUILD_DIR (default build), JOBS (default nproc), TAPEGRAD_SKIP_DEPS=1.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD_DIR="${BUILD_DIR:-build}"
JOBS="${JOBS:-$(nproc)}"

if [[ "${TAPEGRAD_SKIP_DEPS:-0}" != "1" ]]; then
  bash "$ROOT/scripts/install-deps.sh"
fi

GENERATOR="Unix Makefiles"
command -v ninja >/dev/null 2>&1 && GENERATOR="Ninja"
if [[ -f "$BUILD_DIR/CMakeCache.txt" ]] && ! grep -qx "CMAKE_GENERATOR:INTERNAL=${GENERATOR}" "$BUILD_DIR/CMakeCache.txt"; then
  rm -rf "$BUILD_DIR"  # configured earlier with another generator
fi
cmake -S . -B "$BUILD_DIR" -G "$GENERATOR" -DCMAKE_BUILD_TYPE=Release -DTAPEGRAD_SANITIZE=
cmake --build "$BUILD_DIR" -j "$JOBS" --target xor_mlp

echo
echo "==== $BUILD_DIR/examples/xor_mlp $*"
exec "$BUILD_DIR/examples/xor_mlp" "$@"
