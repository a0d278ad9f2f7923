#!/usr/bin/env python3
"""Checks the files of an example run (used by the examples' CTest tests).

  check_run.py RUN_DIR --keys k1,k2 [--metrics rel/metrics.jsonl ...] [--svg rel.svg ...]
               [--numbers k1,k2] [--objects k1,k2] [--checkpoint rel/checkpoint ...]
               [--at-most key=value ...] [--config key=value ...]

summary.json must be a JSON object holding every --keys entry (--numbers: a finite number,
--objects: an object of finite numbers); every metrics file must be JSON lines whose training
loss falls (the mean of the last quarter of the logged losses below the first logged loss);
every SVG file must parse as XML with an <svg> root; every --checkpoint folder must hold the
Trainer's model.safetensors, optimizer.safetensors and trainer.json, the last naming a step > 0;
every --at-most summary number must be at most its bound, every --config entry of config.json must
equal its value (compared as text).
Exits 1 with a message on the first failure.
Needs only the standard library.
"""

import argparse
import json
import math
import os
import sys
import xml.etree.ElementTree as ElementTree


def fail(message):
    print("check_run: " + message, file=sys.stderr)
    sys.exit(1)


def finite(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_metrics(path):
    losses = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError as e:
                fail(f"{path}:{number}: not JSON ({e})")
            if not isinstance(entry, dict) or not finite(entry.get("step")):
                fail(f"{path}:{number}: expected an object with a numeric step")
            if "loss" in entry:
                if not finite(entry["loss"]):
                    fail(f"{path}:{number}: loss {entry['loss']!r} is not a finite number")
                losses.append(entry["loss"])
    if len(losses) < 2:
        fail(f"{path}: {len(losses)} loss lines, need at least 2")
    tail = losses[-max(1, len(losses) // 4):]
    if not sum(tail) / len(tail) < losses[0]:
        fail(f"{path}: loss did not fall: first {losses[0]}, mean of the last {len(tail)} {sum(tail) / len(tail)}")
    print(f"{path}: {len(losses)} losses, {losses[0]:.4g} -> {losses[-1]:.4g}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("run_dir")
    parser.add_argument("--keys", default="")
    parser.add_argument("--numbers", default="")
    parser.add_argument("--objects", default="")
    parser.add_argument("--metrics", action="append", default=[])
    parser.add_argument("--svg", action="append", default=[])
    parser.add_argument("--checkpoint", action="append", default=[])
    parser.add_argument("--at-most", action="append", default=[])
    parser.add_argument("--config", action="append", default=[])
    args = parser.parse_args()

    summary_path = os.path.join(args.run_dir, "summary.json")
    try:
        with open(summary_path) as f:
            summary = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{summary_path}: {e}")
    if not isinstance(summary, dict):
        fail(f"{summary_path}: not a JSON object")
    split = lambda text: [k for k in text.split(",") if k]
    for key in split(args.keys) + split(args.numbers) + split(args.objects):
        if key not in summary:
            fail(f"{summary_path}: missing key {key!r}")
    for key in split(args.numbers):
        if not finite(summary[key]):
            fail(f"{summary_path}: {key} = {summary[key]!r} is not a finite number")
    for key in split(args.objects):
        value = summary[key]
        if not isinstance(value, dict) or not value or not all(finite(v) for v in value.values()):
            fail(f"{summary_path}: {key} = {value!r} is not an object of numbers")
    for bound in args.at_most:
        key, _, limit = bound.partition("=")
        if key not in summary or not finite(summary[key]) or summary[key] > float(limit):
            fail(f"{summary_path}: {key} = {summary.get(key)!r} is not at most {limit}")
    with open(os.path.join(args.run_dir, "config.json")) as f:
        config = json.load(f)
    if not isinstance(config, dict):
        fail("config.json is not a JSON object")
    for entry in args.config:
        key, _, value = entry.partition("=")
        if str(config.get(key)) != value:
            fail(f"config.json: {key} = {config.get(key)!r}, expected {value}")
    for rel in args.metrics:
        check_metrics(os.path.join(args.run_dir, rel))
    for rel in args.svg:
        path = os.path.join(args.run_dir, rel)
        try:
            root = ElementTree.parse(path).getroot()
        except (OSError, ElementTree.ParseError) as e:
            fail(f"{path}: {e}")
        if not root.tag.endswith("svg"):
            fail(f"{path}: root element is {root.tag}, not svg")
    for rel in args.checkpoint:
        folder = os.path.join(args.run_dir, rel)
        for name in ("model.safetensors", "optimizer.safetensors", "trainer.json"):
            if not os.path.isfile(os.path.join(folder, name)):
                fail(f"{folder}: missing {name}")
        with open(os.path.join(folder, "trainer.json")) as f:
            step = json.load(f).get("step")
        if not finite(step) or step <= 0:
            fail(f"{folder}/trainer.json: step {step!r} is not a positive number")
    print(f"{args.run_dir}: ok")


if __name__ == "__main__":
    main()
