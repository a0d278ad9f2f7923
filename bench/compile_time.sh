#!/usr/bin/env bash
# Compile time of a user's training script: the README's (examples/readme_training.cpp) built against
# the installed tapegrad, and the same program on libtorch (bench/readme_training_libtorch.cpp), with
# plain `g++ -O2`, compile and link, one after the other in alternating order, and the compiler's
# peak memory (GNU time's maximum resident set size of g++ and the cc1plus/ld it waits for).
#
#   bench/compile_time.sh                        # 5 rounds against build/
#   bench/compile_time.sh --rounds 7 --build-dir build-compare
#
# Prints a markdown table of medians; bench/RESULTS.md keeps the measured one. Needs libtorch-dev.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rounds=5
build_dir="$repo/build"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "compile_time.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ "$build_dir" = /* ]] || build_dir="$repo/$build_dir"
[[ -f /usr/include/torch/csrc/api/include/torch/torch.h ]] || {
  echo "compile_time.sh: libtorch's headers are missing (apt-get install libtorch-dev)" >&2
  exit 1
}
[[ -x /usr/bin/time ]] || { echo "compile_time.sh: GNU time is missing (apt-get install time)" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cmake --build "$build_dir" --target tapegrad >/dev/null
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
read -r -a tapegrad_flags <<<"$(pkg-config --cflags --libs tapegrad)"
torch_flags=(-I/usr/include/torch/csrc/api/include -ltorch -ltorch_cpu -lc10)

# One build; appends "seconds kilobytes" to $work/<name>.txt.
build() {
  local name="$1"
  shift
  /usr/bin/time -f "%e %M" -o "$work/last" g++ -O2 -std=c++17 "$@" -o "$work/$name.out"
  cat "$work/last" >>"$work/$name.txt"
}
for ((round = 0; round < rounds; ++round)); do
  if ((round % 2 == 0)); then
    build tapegrad "$repo/examples/readme_training.cpp" "${tapegrad_flags[@]}"
    build libtorch "$repo/bench/readme_training_libtorch.cpp" "${torch_flags[@]}"
  else
    build libtorch "$repo/bench/readme_training_libtorch.cpp" "${torch_flags[@]}"
    build tapegrad "$repo/examples/readme_training.cpp" "${tapegrad_flags[@]}"
  fi
done
# Both programs must run and learn: a benchmark of programs that do not work measures nothing.
"$work/tapegrad.out" "$work/run_tapegrad" >/dev/null
"$work/libtorch.out" "$work/run_libtorch" >/dev/null

python3 - "$work" "$rounds" <<'EOF'
import statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def load(name):
    rows = [line.split() for line in open(f"{work}/{name}.txt")]
    return statistics.median(float(r[0]) for r in rows), statistics.median(float(r[1]) for r in rows) / 1024
t_s, t_mb = load("tapegrad")
l_s, l_mb = load("libtorch")
print(f"Compile and link of the README's training script, g++ -O2, median of {rounds} alternating builds:\n")
print("| program | tapegrad | libtorch | tapegrad / libtorch |")
print("| --- | --- | --- | --- |")
print(f"| wall time | {t_s:.2f} s | {l_s:.2f} s | {t_s / l_s:.2f} |")
print(f"| compiler peak memory | {t_mb:.0f} MiB | {l_mb:.0f} MiB | {t_mb / l_mb:.2f} |")
EOF
