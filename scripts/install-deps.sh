#!/usr/bin/env bash
# Installs, from Debian 12's packages, everything tapegrad needs to build and test:
# the compiler, CMake and Ninja, the header-only libraries (xtensor, xtl, xsimd, nlohmann_json,
# doctest), OpenBLAS for cblas_sgemm, zlib for crc32, pkg-config, python3 with NumPy, protobuf and
# PyTorch (the tests' independent readers and the PyTorch round trips), clang-format (the formatting
# check), and the King James Bible (bible-kjv-text, the language
# model's corpus, and bible-kjv, its reader, which the corpus loader's test compares against).
#
# Idempotent: when every package is already installed it does nothing (set
# TAPEGRAD_FORCE_APT=1 to run apt-get anyway). Uses sudo only when not run as root.
set -euo pipefail

PACKAGES=(
  build-essential    # g++ 12, make, libc headers
  cmake
  ninja-build
  pkg-config
  libxtensor-dev
  xtl-dev
  libxsimd-dev
  nlohmann-json3-dev
  doctest-dev
  libopenblas-dev
  zlib1g-dev         # crc32 for the checksums in checkpoint files
  libopenmpi-dev     # tapegrad::dist, data parallelism over MPI (optional for the library, tested here)
  openmpi-bin        # mpirun, for the tests and the data-parallel examples
  python3
  python3-numpy      # tests/read_npy.py reads the .npy and .npz files tapegrad writes
  python3-protobuf   # tests/tensorboard_check.py parses TensorBoard event files with protobuf
  protobuf-compiler  # protoc: the Python classes of tests/data/tensorboard/event.proto
  python3-torch      # tests/torch_interop.py: weights between PyTorch and tapegrad, both ways
  clang-format       # scripts/check-format.sh: CI checks the formatting (clang-format 14)
  bible-kjv-text     # /usr/lib/bible.data: examples/language_model's corpus
  bible-kjv          # /usr/bin/bible: the reference the corpus loader's test compares with
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  # "install ok installed" is dpkg's status of a fully installed package.
  if [[ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)" != "install ok installed" ]]; then
    missing+=("$pkg")
  fi
done

if [[ ${#missing[@]} -eq 0 && "${TAPEGRAD_FORCE_APT:-0}" != "1" ]]; then
  echo "install-deps: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

SUDO=()
if [[ "$(id -u)" -ne 0 ]]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "install-deps: not root and sudo is not available; install as root: ${missing[*]:-${PACKAGES[*]}}" >&2
    exit 1
  fi
  SUDO=(sudo)
fi

export DEBIAN_FRONTEND=noninteractive
# Wait for another apt/dpkg run to finish rather than failing on its lock.
APT_OPTS=(-o DPkg::Lock::Timeout=600 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)

echo "install-deps: installing ${missing[*]:-${PACKAGES[*]}}"
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "${APT_OPTS[@]}" update
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "${APT_OPTS[@]}" install -y --no-install-recommends "${PACKAGES[@]}"
echo "install-deps: done"
