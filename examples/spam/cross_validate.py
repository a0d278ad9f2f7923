#!/usr/bin/env python3
"""k-fold cross-validation of the spam classifier: every training and validation email validated once.

  cross_validate.py --program build/examples/spam_classifier [--folds 9] [--out runs/spam_cv]
                    [-- train options ...]

Runs `spam_classifier train --folds K --fold k` for k = 0 .. K-1, each in its own run directory
(OUT/fold_k), with the train options after "--" (a model, a seed, a data folder, ...). Each run
deals the training and validation emails of its --split_seed into the same K stratified folds and
validates on fold k; the test emails stay out of every fold. Then it reads only the runs'
validation figures, never their test ones, and prints a Markdown table (header, separator, a row
for the model named by its train options and one for the Naive Bayes baseline):

  mistakes: the validation emails read wrong over the K folds (ham read as spam, spam read as ham),
  pooled F1: the F1 of the K folds' predictions taken together,
  F1 by fold: the mean, lowest and highest of the runs' best validation F1.

Every run is given --progress off. Each fold also picks its model's best step by its own validation
F1, so the model's figures (not Naive Bayes') are slightly optimistic. Writes
OUT/cross_validation.json with the same figures and the emails read wrong. Needs only the
standard library.
"""

import argparse
import json
import os
import subprocess
import sys


def pooled_f1(fp, fn, spam):
    tp = spam - fn
    return 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    parser.add_argument("--program", required=True, help="the spam_classifier program")
    parser.add_argument("--folds", type=int, default=9)
    parser.add_argument("--out", default="runs/spam_cv", help="the folds' run directories go in here")
    parser.add_argument("train_options", nargs="*", help="spam_classifier train options, after --")
    args = parser.parse_args()
    if args.folds < 2:
        parser.error("--folds must be at least 2, got %d" % args.folds)
    reserved = {"--folds", "--fold", "--run_dir", "--run-dir", "--stop_after", "--stop-after", "--help", "-h",
                "--print-config", "--print_config"}
    clash = reserved.intersection(option.split("=")[0] for option in args.train_options)
    if clash:
        parser.error("the train options may not set %s: cross_validate.py sets them or needs whole runs" % ", ".join(sorted(clash)))

    os.makedirs(args.out, exist_ok=True)
    model = {"fp": 0, "fn": 0, "f1": [], "wrong": []}
    naive_bayes = {"fp": 0, "fn": 0}
    emails = spam = 0
    for fold in range(args.folds):
        run_dir = os.path.join(args.out, "fold_%d" % fold)
        summary_path = os.path.join(run_dir, "summary.json")
        if os.path.exists(summary_path):
            os.remove(summary_path)  # an earlier run's must not be read for this one's
        command = [args.program, "train", *args.train_options, "--folds", str(args.folds), "--fold", str(fold),
                   "--progress", "off", "--run_dir", run_dir]
        print("cross_validate: --fold %d of --folds %d" % (fold, args.folds), file=sys.stderr, flush=True)
        if subprocess.run(command, stdout=subprocess.DEVNULL).returncode != 0:
            sys.exit("cross_validate: fold %d failed: %s" % (fold, " ".join(command)))
        if not os.path.exists(summary_path):
            sys.exit("cross_validate: fold %d wrote no %s: %s" % (fold, summary_path, " ".join(command)))
        with open(summary_path) as f:
            summary = json.load(f)
        nb = summary["baseline_nb_validation"]["confusion"]  # [[tn, fp], [fn, tp]]
        emails += summary["emails"]["validation"]
        spam += nb[1][0] + nb[1][1]
        naive_bayes["fp"] += nb[0][1]
        naive_bayes["fn"] += nb[1][0]
        model["f1"].append(summary["best_val_f1"])
        for mistake in summary["validation_mistakes"]:
            model["fn" if mistake["spam"] else "fp"] += 1
            model["wrong"].append(mistake["email"])

    result = {
        "folds": args.folds,
        "train_options": args.train_options,
        "emails": emails,
        "spam": spam,
        "model": {
            "mistakes": model["fp"] + model["fn"],
            "ham_read_as_spam": model["fp"],
            "spam_read_as_ham": model["fn"],
            "pooled_f1": pooled_f1(model["fp"], model["fn"], spam),
            "best_val_f1_by_fold": model["f1"],
            "emails_read_wrong": sorted(model["wrong"]),
        },
        "naive_bayes": {
            "mistakes": naive_bayes["fp"] + naive_bayes["fn"],
            "ham_read_as_spam": naive_bayes["fp"],
            "spam_read_as_ham": naive_bayes["fn"],
            "pooled_f1": pooled_f1(naive_bayes["fp"], naive_bayes["fn"], spam),
        },
    }
    path = os.path.join(args.out, "cross_validation.json")
    with open(path + ".tmp", "w") as f:  # written whole, then renamed: never a half-written file
        json.dump(result, f, indent=2)
        f.write("\n")
    os.replace(path + ".tmp", path)

    f1 = model["f1"]
    name = " ".join(args.train_options) or "the defaults"
    print("| model | validation mistakes of %d (ham read as spam, spam read as ham) | pooled F1 (the folds' "
          "predictions together) | "
          "best validation F1 by fold, mean (lowest, highest) |" % emails)
    print("| --- | --- | --- | --- |")
    print("| %s | %d (%d, %d) | %.4f | %.4f (%.4f, %.4f) |" %
          (name, result["model"]["mistakes"], model["fp"], model["fn"], result["model"]["pooled_f1"],
           sum(f1) / len(f1), min(f1), max(f1)))
    print("| Naive Bayes | %d (%d, %d) | %.4f | |" %
          (result["naive_bayes"]["mistakes"], naive_bayes["fp"], naive_bayes["fn"],
           result["naive_bayes"]["pooled_f1"]))


if __name__ == "__main__":
    main()
