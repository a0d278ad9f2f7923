#!/usr/bin/env bash
# Trains the language-model experiment (examples/language_model) for the same wall-clock budget with
# tapegrad and with libtorch (bench/lm_libtorch.cpp), one after the other, and draws both runs' held-out
# loss against training time into bench/lm_curves.svg; prints a markdown table of their results.
#
#   bench/lm_compare.sh                        # install libtorch-dev if needed, build, 600 s each
#   bench/lm_compare.sh --budget 900 --build-dir build-compare --runs-dir runs/lm_compare
#   bench/lm_compare.sh --quick                # 20 s each, to check the pipeline (figures not comparable)
#   bench/lm_compare.sh -- --lr 3e-4 --seed 1  # flags after -- go to both programs (LmConfig keys)
#
# Both programs read the same LmConfig flags, so they train on the same batches (TokenStream windows drawn
# from the seed and the step) with the same model, optimiser, clip and schedule, and stop the same way.
# Never run the two at once: each wants both cores. libtorch runs with OMP_WAIT_POLICY=PASSIVE (its best
# on 2 cores, docs/bench.md); both get OPENBLAS_NUM_THREADS=threads, tapegrad TAPEGRAD_NUM_THREADS=threads
# and libtorch --threads. OPENBLAS_CORETYPE is left as the environment sets it, for both.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
budget=600
threads=2
build_dir="$repo/build-compare"
runs_dir="$repo/runs/lm_compare"
out=""
quick=0
skip_build=0
extra=()

while [[ $# -gt 0 ]]; do
  case "$1" in
    --budget) budget="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    --runs-dir) runs_dir="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    --skip-build) skip_build=1; shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "lm_compare.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ "$build_dir" = /* ]] || build_dir="$repo/$build_dir"
[[ "$runs_dir" = /* ]] || runs_dir="$repo/$runs_dir"
# A quick run's curves are not comparable: they stay beside its runs instead of replacing bench/lm_curves.svg.
if [[ -z "$out" ]]; then
  if [[ $quick -eq 1 ]]; then out="$runs_dir/lm_curves.svg"; else out="$repo/bench/lm_curves.svg"; fi
fi
flags=(--time_budget_s "$budget" --progress lines)
[[ $quick -eq 1 ]] && flags=(--time_budget_s 20 --log_every 5 --eval_every 10 --eval_windows 16 --progress lines)
flags+=("${extra[@]}")

# ---------------------------------------------------------------- dependencies and build
if ! dpkg -s libtorch-dev >/dev/null 2>&1; then
  echo "lm_compare.sh: installing libtorch-dev" >&2
  sudo_cmd=""
  [[ $(id -u) -eq 0 ]] || sudo_cmd="sudo"
  $sudo_cmd apt-get update
  $sudo_cmd apt-get install -y --no-install-recommends libtorch-dev
fi
if [[ $skip_build -eq 0 ]]; then
  cmake -S "$repo" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTAPEGRAD_SANITIZE= \
    -DTAPEGRAD_BUILD_TESTS=OFF -DTAPEGRAD_BUILD_EXAMPLES=ON -DTAPEGRAD_BENCH_LIBTORCH=ON >/dev/null
  cmake --build "$build_dir" -j"$(nproc)" --target language_model libtorch_lm lm_compare_plot
fi
tapegrad_bin="$build_dir/examples/language_model"
libtorch_bin="$build_dir/bench/libtorch_lm"
plot_bin="$build_dir/bench/lm_compare_plot"
for bin in "$tapegrad_bin" "$libtorch_bin" "$plot_bin"; do
  [[ -x "$bin" ]] || { echo "lm_compare.sh: $bin is not built" >&2; exit 1; }
done

# ---------------------------------------------------------------- runs, one after the other
mkdir -p "$runs_dir"
cpu="$(lscpu | sed -n 's/^Model name: *//p' | head -1)"
loads=()
run() {
  local name="$1"; shift
  loads+=("$name before: $(cut -d' ' -f1-3 /proc/loadavg)")
  echo "lm_compare.sh: $name: $*" >&2
  "$@" --run_dir "$runs_dir/$name" "${flags[@]}"
  loads+=("$name after: $(cut -d' ' -f1-3 /proc/loadavg)")
}
run tapegrad env OPENBLAS_NUM_THREADS="$threads" TAPEGRAD_NUM_THREADS="$threads" "$tapegrad_bin"
run libtorch env OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS="$threads" "$libtorch_bin" --threads "$threads"

# ---------------------------------------------------------------- curves and table
table="$("$plot_bin" --out "$out" tapegrad="$runs_dir/tapegrad" libtorch="$runs_dir/libtorch")"
{
  echo "Language model at equal wall-clock time: $( [[ $quick -eq 1 ]] && echo "20 s (QUICK RUN: not comparable)" || echo "$budget s") per framework, $threads threads"
  echo "Machine: $cpu, $(nproc) cores; libtorch with OMP_WAIT_POLICY=PASSIVE; $(date -u '+%Y-%m-%d %H:%M UTC')."
  echo "Load average (1, 5, 15 min): $(printf '%s; ' "${loads[@]}" | sed 's/; $/./')"
  echo "Flags of both runs: ${flags[*]}"
  echo
  echo "$table"
  echo
  echo "Curves: $out; runs: $runs_dir/{tapegrad,libtorch}"
} | tee "$runs_dir/results.md"
