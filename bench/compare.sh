#!/usr/bin/env bash
# Runs the workloads of docs/bench.md on tapegrad and on libtorch, alternating, on this
# machine, and writes a markdown table of medians, ratios and peak memory to bench/RESULTS.md.
#
#   bench/compare.sh                 # install libtorch-dev if needed, build, 5 rounds, 2 threads
#   bench/compare.sh --rounds 3 --threads 2 --build-dir build-compare --out bench/RESULTS.md
#   bench/compare.sh --quick         # short runs to check the pipeline (figures not comparable)
#   bench/compare.sh --workloads w7 --out /tmp/w7.md   # only these workloads (comma-separated)
#
# Each round runs every workload once per framework in its own process (so ru_maxrss is that
# workload's peak), in the order tapegrad, libtorch with OMP_WAIT_POLICY=PASSIVE, libtorch as
# is, rotated by one every round. A workload's figure is the median over rounds of each run's
# own median (w2conv, a whole training run, runs in the first round only). OPENBLAS_CORETYPE is
# left as the environment sets it, for both frameworks.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rounds=5
threads=2
build_dir="$repo/build-compare"
out="$repo/bench/RESULTS.md"
quick=0
skip_build=0
only=""

while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    --skip-build) skip_build=1; shift ;;
    --workloads) only=",$2,"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "compare.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ "$build_dir" = /* ]] || build_dir="$repo/$build_dir"

# ---------------------------------------------------------------- dependencies and build
if ! dpkg -s libtorch-dev >/dev/null 2>&1; then
  echo "compare.sh: installing libtorch-dev" >&2
  sudo_cmd=""
  [[ $(id -u) -eq 0 ]] || sudo_cmd="sudo"
  $sudo_cmd apt-get update
  $sudo_cmd apt-get install -y --no-install-recommends libtorch-dev
fi
if [[ $skip_build -eq 0 ]]; then
  cmake -S "$repo" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTAPEGRAD_SANITIZE= \
    -DTAPEGRAD_BUILD_TESTS=OFF -DTAPEGRAD_BUILD_EXAMPLES=OFF -DTAPEGRAD_BENCH_LIBTORCH=ON >/dev/null
  cmake --build "$build_dir" -j"$(nproc)" --target tapegrad_bench libtorch_bench
fi
tapegrad_bin="$build_dir/bench/tapegrad_bench"
libtorch_bin="$build_dir/bench/libtorch_bench"

# ---------------------------------------------------------------- runs
results="$(mktemp /tmp/tapegrad-compare.XXXXXX.jsonl)"
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
quick_args=()
[[ $quick -eq 1 ]] && quick_args=(--warmup 1 --steps 3)

# run VARIANT THREADS WORKLOAD: one process, its JSON lines tagged with the variant (a variant the
# program reports itself, W5's or W7's, is kept as program_variant). WORKLOAD w5:T is W5 at
# sequence length T.
run() {
  local variant="$1" nthreads="$2" workload="$3" line
  local args=(--workload "${workload%%:*}" --json --threads "$nthreads")
  [[ "$workload" == w5:* ]] && args+=(--seq "${workload#w5:}")
  if [[ $quick -eq 1 ]]; then
    case "$workload" in
      w1) args+=(--warmup 100 --steps 2000) ;;
      w2conv) args+=(--steps 200) ;;
      *) args+=("${quick_args[@]}") ;;
    esac
  fi
  case "$variant" in
    tapegrad) line="$(OPENBLAS_NUM_THREADS="$nthreads" "$tapegrad_bin" "${args[@]}")" ;;
    tapegrad-unfused) line="$(OPENBLAS_NUM_THREADS="$nthreads" "$tapegrad_bin" "${args[@]}" --unfused)" ;;
    libtorch-passive) line="$(OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS="$nthreads" "$libtorch_bin" "${args[@]}")" ;;
    libtorch-as-is) line="$(OPENBLAS_NUM_THREADS="$nthreads" "$libtorch_bin" "${args[@]}")" ;;
  esac
  echo "$line" | python3 -c '
import json, sys
for l in sys.stdin.read().splitlines():
    if not l.strip(): continue
    r = json.loads(l)
    if "variant" in r: r["program_variant"] = r["variant"]
    r["variant"] = sys.argv[1]; r["round"] = int(sys.argv[2]); print(json.dumps(r))' \
    "$variant" "$round" >>"$results"
  echo "  round $round $variant $workload threads=$nthreads: $(echo "$line" | python3 -c '
import json, sys
out = []
for l in sys.stdin.read().splitlines():
    if not l.strip(): continue
    r = json.loads(l)
    tag = " ".join(str(r[k]) for k in ("vocab", "variant") if k in r and r.get("workload") == "w7")
    if r.get("us_per_step") is not None: out.append("%.1f us/step" % r["us_per_step"])
    elif r.get("median_ms") is not None: out.append((tag + " " if tag else "") + "%.3f ms" % r["median_ms"])
    else: out.append("solved at step %s" % r.get("solved_at_step"))
print("; ".join(out))')" >&2
}

variants=(tapegrad libtorch-passive libtorch-as-is)
attention_variants=(tapegrad tapegrad-unfused libtorch-passive)
embedding_variants=(tapegrad libtorch-passive)
jobs=("sgemm $threads" "w1 $threads" "w1 1" "w2 $threads" "w2conv $threads" "w3 $threads" "w4 $threads" "w6 $threads" "w9 $threads"
  "w5:512 $threads" "w5:1024 $threads" "w5:2048 $threads" "w5:4096 $threads" "w7 $threads" "w7 1")
for ((round = 1; round <= rounds; ++round)); do
  for job in "${jobs[@]}"; do
    read -r workload nthreads <<<"$job"
    [[ -n "$only" && "$only" != *",${workload%%:*},"* ]] && continue
    for ((i = 0; i < 3; ++i)); do
      variant="${variants[$(((i + round - 1) % 3))]}"
      # W5 compares the fused kernel with tapegrad's unfused path and libtorch at its best.
      [[ "$workload" == w5:* ]] && variant="${attention_variants[$(((i + round - 1) % 3))]}"
      # W7 (tables up to 1e6 x 100, a process takes about 25 s) runs against libtorch at its best only.
      if [[ "$workload" == w7 ]]; then
        ((i < 2)) || continue
        variant="${embedding_variants[$(((i + round - 1) % 2))]}"
      fi
      # w2conv (a whole training run, minutes when it never converges) runs in the first round
      # only, and only against libtorch at its best.
      [[ "$workload" == w2conv && ( "$variant" == libtorch-as-is || $round -gt 1 ) ]] && continue
      run "$variant" "$nthreads" "$workload"
    done
  done
done
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"

# ---------------------------------------------------------------- table
cpu="$(lscpu | sed -n 's/^Model name: *//p' | head -1)"
cores="$(nproc)"
python3 - "$results" "$out" "$cpu" "$cores" "$threads" "$rounds" "$load_before" "$load_after" "${OPENBLAS_CORETYPE:-unset}" "$quick" <<'EOF'
import json, statistics, sys, datetime, subprocess
results, out, cpu, cores, threads, rounds, load_before, load_after, coretype, quick = sys.argv[1:]
rows = [json.loads(l) for l in open(results) if l.strip()]

def pick(workload, variant, nthreads=None):
    return [r for r in rows if r["workload"] == workload and r["variant"] == variant
            and (nthreads is None or r["threads"] == nthreads)]

def med(rs, key):
    vals = [r[key] for r in rs if r.get(key) is not None]
    return statistics.median(vals) if vals else None

def fmt(v, unit="", digits=1):
    if v is None: return "n/a"
    return f"{v:,.{digits}f}{unit}"

T = int(threads)
lines = []
lines.append("# tapegrad vs libtorch: measured results\n")
lines.append(f"Generated by `bench/compare.sh` on {datetime.datetime.utcnow().strftime('%Y-%m-%d %H:%M UTC')}.\n")
lines.append(f"- Machine: {cpu}, {cores} cores; OpenBLAS 0.3.21 with OPENBLAS_CORETYPE={coretype}; libtorch 1.13.1 (Debian).")
lines.append(f"- Rounds: {rounds}; each figure is the median over rounds of each run's own median; the frameworks ran")
lines.append(f"  alternately, each workload in its own process. Load average (1, 5, 15 min) before: {load_before}; after: {load_after}.")
lines.append(f"- libtorch is shown with OMP_WAIT_POLICY=PASSIVE (its best here) and as is; ratios are against PASSIVE.")
if quick == "1":
    lines.append("- QUICK RUN: few steps per workload; these figures are not comparable with the definitions.")
lines.append("")
lines.append("| workload | threads | tapegrad | libtorch (PASSIVE) | libtorch (as is) | tapegrad / libtorch | peak RSS tapegrad | peak RSS libtorch |")
lines.append("| --- | --- | --- | --- | --- | --- | --- | --- |")

def row(label, workload, nthreads, key, unit, digits=1, lower_better=True):
    t = pick(workload, "tapegrad", nthreads)
    p = pick(workload, "libtorch-passive", nthreads)
    a = pick(workload, "libtorch-as-is", nthreads)
    tv, pv, av = med(t, key), med(p, key), med(a, key)
    ratio = f"{tv / pv:.2f}" if tv and pv else "n/a"
    lines.append(f"| {label} | {nthreads} | {fmt(tv, unit, digits)} | {fmt(pv, unit, digits)} | {fmt(av, unit, digits)} | {ratio} | "
                 f"{fmt(med(t, 'peak_rss_mib'), ' MiB', 0)} | {fmt(med(p, 'peak_rss_mib'), ' MiB', 0)} |")
    return tv, pv, av

s0 = row("S0 sgemm 1024 (GFLOP/s)", "sgemm", T, "gflops", "", 0)
row("W1 spam-toy (us/step)", "w1", T, "us_per_step", "", 1)
row("W1 spam-toy (us/step)", "w1", 1, "us_per_step", "", 1)
row("W2 reversal (ms/step)", "w2", T, "median_ms", "", 2)
w3 = row("W3 causal LM (ms/step)", "w3", T, "median_ms", "", 1)
row("W4 MoE fwd+bwd (ms)", "w4", T, "median_ms", "", 1)
row("W6 2-layer LSTM fwd+bwd (ms)", "w6", T, "median_ms", "", 1)
row("W9 small CNN step (ms/step)", "w9", T, "median_ms", "", 1)
lines.append("")
lines.append("Ratios below 1 mean tapegrad is faster (for S0, a ratio of GFLOP/s: above 1 means faster).")
lines.append("")

# W5: one causal attention, forward + backward, by sequence length.
w5 = sorted({r["seq"] for r in rows if r["workload"] == "w5"})
if w5:
    lines.append("W5, one causal attention (batch 1, 8 heads, head dim 64) forward + backward: time and the "
                 "process's peak resident memory above what it held before the first step.")
    lines.append("")
    lines.append("| T | tapegrad fused | tapegrad unfused | libtorch (PASSIVE) | fused / libtorch | "
                 "memory fused | memory unfused | memory libtorch | libtorch / fused memory |")
    lines.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for t in w5:
        def at(variant):
            return [r for r in rows if r["workload"] == "w5" and r["variant"] == variant and r["seq"] == t]
        f, u, p = at("tapegrad"), at("tapegrad-unfused"), at("libtorch-passive")
        fm, um, pm = med(f, "median_ms"), med(u, "median_ms"), med(p, "median_ms")
        fmem, umem, pmem = med(f, "attention_peak_mib"), med(u, "attention_peak_mib"), med(p, "attention_peak_mib")
        lines.append(f"| {t} | {fmt(fm, ' ms', 1)} | {fmt(um, ' ms', 1)} | {fmt(pm, ' ms', 1)} | "
                     f"{f'{fm / pm:.2f}' if fm and pm else 'n/a'} | {fmt(fmem, ' MiB', 1)} | {fmt(umem, ' MiB', 1)} | "
                     f"{fmt(pmem, ' MiB', 1)} | {f'{pmem / fmem:.1f}' if fmem and pmem else 'n/a'} |")
    lines.append("")

# W7: the sparse embedding step, by vocabulary, variant and thread count.
w7 = [r for r in rows if r["workload"] == "w7"]
if w7:
    lines.append("W7, one sparse embedding step (a (V, 100) table, 4096 uniform indices, forward, backward, optimiser "
                 "step, zero_grad), ms per step; the variants alternate within each process.")
    lines.append("")
    lines.append("| V | variant | threads | tapegrad | libtorch (PASSIVE) | tapegrad / libtorch |")
    lines.append("| --- | --- | --- | --- | --- | --- |")
    for nthreads in sorted({r["threads"] for r in w7}, reverse=True):
        for vocab in sorted({r["vocab"] for r in w7}):
            for case in ("sparse-sgd", "sparse-adam", "dense-sgd"):
                def at(variant):
                    return [r for r in w7 if r["variant"] == variant and r["threads"] == nthreads
                            and r["vocab"] == vocab and r["program_variant"] == case]
                tm, pm = med(at("tapegrad"), "median_ms"), med(at("libtorch-passive"), "median_ms")
                lines.append(f"| {vocab:,} | {case} | {nthreads} | {fmt(tm, ' ms', 2)} | {fmt(pm, ' ms', 2)} | "
                             f"{f'{tm / pm:.2f}' if tm and pm else 'n/a'} |")
    lines.append("")

# W3 FLOP rate as a fraction of S0, per framework.
w3t, w3p = med(pick("w3", "tapegrad", T), "gflops"), med(pick("w3", "libtorch-passive", T), "gflops")
tok_t, tok_p = med(pick("w3", "tapegrad", T), "tokens_per_s"), med(pick("w3", "libtorch-passive", T), "tokens_per_s")
gflop = med(pick("w3", "tapegrad", T), "step_gflop")
lines.append(f"W3: {fmt(gflop, '', 1)} GFLOP of matrix products per step. tapegrad {fmt(w3t, ' GFLOP/s', 0)} "
             f"({fmt(tok_t, ' tokens/s', 0)}), {fmt(100 * w3t / s0[0] if w3t and s0[0] else None, '%', 0)} of its S0; "
             f"libtorch (PASSIVE) {fmt(w3p, ' GFLOP/s', 0)} ({fmt(tok_p, ' tokens/s', 0)}), "
             f"{fmt(100 * w3p / s0[1] if w3p and s0[1] else None, '%', 0)} of its S0.")
lines.append("")
# W2 convergence.
for variant, name in (("tapegrad", "tapegrad"), ("libtorch-passive", "libtorch (PASSIVE)")):
    rs = pick("w2conv", variant, T)
    steps = [r["solved_at_step"] for r in rs]
    secs = [r["seconds"] for r in rs if r["solved_at_step"] is not None]
    solved = [s for s in steps if s is not None]
    lines.append(f"W2 {name}: 100% held-out exact match at step {statistics.median(solved) if solved else 'never'} "
                 f"(runs: {steps}), median wall time {fmt(statistics.median(secs) if secs else None, ' s', 1)}.")
lines.append("")
w1l = pick("w1", "tapegrad", T)
lines.append("W1 final loss: tapegrad " + ", ".join(sorted({f"{r['final_loss']:.3g}" for r in w1l})) +
             "; libtorch " + ", ".join(sorted({f"{r['final_loss']:.3g}" for r in pick('w1', 'libtorch-passive', T)})) +
             " (different initial values, same data).")
text = "\n".join(lines) + "\n"
open(out, "w").write(text)
print(text)
EOF
echo "raw results: $results" >&2
