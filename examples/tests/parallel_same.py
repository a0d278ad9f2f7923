"""Data parallelism in an experiment: the program run alone and under `mpirun -np 2` (on one machine, or
on the nodes of a hostfile, as FLAGS say) with the same global batch must reach the same results
(summary.json's KEYS, paths like "final_loss/learned/0", within a relative TOLERANCE; float sums in
another order are the only difference), and the parallel run's files are written once. The files of
IDENTICAL (";"-separated, paths in the run directory), when given, must be the same bytes.

    parallel_same.py MPIEXEC "FLAGS" RUNS KEYS TOLERANCE [IDENTICAL] -- PROGRAM ARGS...
"""
import json
import os
import re
import shutil
import subprocess
import sys


def run(command, run_dir):
    shutil.rmtree(run_dir, ignore_errors=True)
    done = subprocess.run(command + ["--run_dir", run_dir], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} exited with {done.returncode}:\n{done.stdout}{done.stderr}")
    with open(os.path.join(run_dir, "summary.json")) as f:
        summary = json.load(f)
    lines = {}  # every metrics.jsonl of the run (sequence_reversal keeps one per model and seed): its lines
    for folder, _, files in os.walk(run_dir):
        if "metrics.jsonl" in files:
            with open(os.path.join(folder, "metrics.jsonl")) as f:
                lines[os.path.relpath(folder, run_dir)] = len(f.read().splitlines())
    if not lines:
        sys.exit(f"{run_dir} holds no metrics.jsonl")
    return summary, lines, done.stdout + done.stderr


def lookup(summary, key):
    """A value of summary.json by its path: "final_loss/learned/0" is summary["final_loss"]["learned"][0]."""
    value = summary
    for part in key.split("/"):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def main():
    split = sys.argv.index("--")
    mpiexec, flags, runs, keys, tolerance, *identical = sys.argv[1:split]
    program = sys.argv[split + 1:]
    one, one_lines, _ = run(program, os.path.join(runs, "one"))
    two, two_lines, two_output = run([mpiexec] + flags.split(";") + ["-np", "2"] + program, os.path.join(runs, "two"))
    if not re.search(r"\b2 process", two_output):  # "2 process(es)", "on 2 processes"
        sys.exit(f"the mpirun run did not train on 2 processes:\n{two_output}")
    if one_lines != two_lines:
        sys.exit(f"metrics.jsonl lines: {one_lines} alone, {two_lines} under mpirun (written twice?)")
    for key in keys.split(";"):
        a, b = float(lookup(one, key)), float(lookup(two, key))
        if abs(a - b) > float(tolerance) * max(abs(a), abs(b)):
            sys.exit(f"summary.json {key}: {a} alone, {b} on 2 processes (tolerance {tolerance} relative)")
        print(f"{key}: {a} alone, {b} on 2 processes")
    for name in identical[0].split(";") if identical else []:
        with open(os.path.join(runs, "one", name), "rb") as f, open(os.path.join(runs, "two", name), "rb") as g:
            if f.read() != g.read():
                sys.exit(f"{name} differs between the run alone and the run on 2 processes")
        print(f"{name}: the same bytes alone and on 2 processes")


if __name__ == "__main__":
    main()
