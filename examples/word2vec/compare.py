#!/usr/bin/python3
"""Trains word vectors with tapegrad's word2vec, gensim and fastText on the same corpus file and
compares speed and quality.

  compare.py --word2vec build/examples/word2vec [--seeds 3] [--threads 2] [--epochs 5]
             [--models skipgram:ns,cbow:ns,skipgram:hs,cbow:hs,skipgram:ns:subwords,glove]
             [--out runs/word2vec_compare]

Each seed of each model first runs tapegrad's program, which writes the tokenised verses it trains
on (corpus.txt); gensim (Debian's python3-gensim, corpus_file mode) and fastText (Debian's
fasttext, subwords off: -minn 0 -maxn 0) then train on that file with the same hyperparameters:
dim 100, window 5, negative 5 (ns) or hierarchical softmax (hs), sample 1e-3, min_count 5, the
same starting learning rate decayed linearly, the same epochs and threads.

A model spec ending in ":subwords" trains fastText's model instead: character n-grams of 3 to 6
characters in 2,000,000 hash buckets (tapegrad --minn 3 --maxn 6 --buckets 2000000, gensim's
FastText class, fasttext -minn 3 -maxn 6 -bucket 2000000), the other hyperparameters as above.

GloVe (model "glove", tapegrad only: neither gensim nor fastText trains it) runs on the same corpus
with its own epochs, window and x_max (--glove_epochs 25, --glove_window 10, --glove_x_max 10:
examples/configs/word2vec_glove.json's) and Adagrad.

Speed: words per second = epochs x the corpus words the vocabulary keeps / training seconds
(tapegrad's and gensim's training loops timed alone, GloVe's co-occurrence counting included;
fastText's whole run, reading included).

Quality, from a lexical resource none of the three saw: the synonyms of GCIDE (Debian's dict-gcide,
/usr/share/dictd/gcide.dict.dz: its "Syn:" lines, Webster 1913 and WordNet). For each pair
(headword, synonym) of single words in the vocabulary, the synonym's percentile among all words by
cosine similarity to the headword (1: nearest, 0.5: chance), averaged over the pairs in both
directions; also the share of pairs whose synonym is among the headword's 10 nearest words.

Writes results.json and prints a Markdown table (mean and spread over the seeds).
Needs /usr/bin/python3 with numpy and gensim, and the fasttext program.
"""

import argparse
import base64
import gzip
import json
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np

GCIDE_DICT = "/usr/share/dictd/gcide.dict.dz"
GCIDE_INDEX = "/usr/share/dictd/gcide.index"
DICTD_DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def dictd_number(text):
    value = 0
    for ch in text:
        value = value * 64 + DICTD_DIGITS.index(ch)
    return value


def gcide_synonyms():
    """(headword, synonym) pairs of single lowercase words from GCIDE's Syn: lines."""
    for path in (GCIDE_DICT, GCIDE_INDEX):
        if not os.path.exists(path):
            sys.exit(f"compare.py: {path} is missing (apt-get install dict-gcide)")
    with gzip.open(GCIDE_DICT, "rb") as f:
        text = f.read()
    word = re.compile(r"^[a-z]+$")
    pairs = set()
    with open(GCIDE_INDEX, encoding="utf-8", errors="replace") as index:
        for line in index:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3 or parts[0].startswith("00-database"):
                continue
            head = parts[0].lower()
            if not word.match(head):
                continue
            start, length = dictd_number(parts[1]), dictd_number(parts[2])
            body = text[start:start + length].decode("utf-8", errors="replace")
            for block in re.findall(r"Syn:(.*?)(?:\[|\n\s*\n|$)", body, flags=re.S):
                block = re.sub(r"Syn\.|--|\{|\}", " ", block)
                for item in re.split(r"[;,.]", block):
                    item = item.strip().lower()
                    if item.startswith("to "):
                        item = item[3:].strip()
                    if word.match(item) and item != head:
                        pairs.add((head, item))
    return pairs


def read_vectors(path):
    with open(path, encoding="utf-8") as f:
        rows, dim = (int(v) for v in f.readline().split())
        words, data = [], np.empty((rows, dim), dtype=np.float32)
        for i in range(rows):
            parts = f.readline().rstrip().split(" ")
            words.append(parts[0])
            data[i] = np.asarray(parts[1:], dtype=np.float32)
    norms = np.linalg.norm(data, axis=1, keepdims=True)
    return words, data / np.maximum(norms, 1e-12)


def synonym_quality(path, pairs):
    words, unit = read_vectors(path)
    at = {w: i for i, w in enumerate(words)}
    used = [(at[a], at[b]) for a, b in pairs if a in at and b in at]
    percentiles, hits = [], 0
    for a, b in used:
        for x, y in ((a, b), (b, a)):
            sims = unit @ unit[x]
            sims[x] = -np.inf
            percentiles.append(float(np.mean(sims[np.arange(len(sims)) != x] < sims[y])))
            hits += int(np.sum(sims > sims[y]) < 10)
    return {"pairs": len(used), "synonym_percentile": float(np.mean(percentiles)),
            "synonym_top10": hits / (2 * len(used))}


SUBWORDS = {"minn": 3, "maxn": 6, "buckets": 2000000}


def run_tapegrad(args, model, loss, seed, run_dir, epochs, extra=()):
    command = [args.word2vec, "--model", model, "--loss", loss, "--seed", str(seed), "--epochs", str(epochs),
               "--threads", str(args.threads), "--run_dir", run_dir, *extra]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(run_dir, "summary.json")) as f:
        summary = json.load(f)
    return summary


def run_gensim(args, model, loss, seed, corpus, lr, out_path, subwords):
    from gensim.models import FastText, Word2Vec
    common = dict(vector_size=100, window=5, min_count=5, sample=1e-3, sg=int(model == "skipgram"),
                  hs=int(loss == "hs"), negative=5 if loss == "ns" else 0, alpha=lr, min_alpha=lr * 1e-4,
                  workers=args.threads, seed=seed)
    if subwords:
        w2v = FastText(min_n=SUBWORDS["minn"], max_n=SUBWORDS["maxn"], bucket=SUBWORDS["buckets"], **common)
    else:
        w2v = Word2Vec(**common)
    w2v.build_vocab(corpus_file=corpus)
    start = time.perf_counter()
    w2v.train(corpus_file=corpus, total_examples=w2v.corpus_count, total_words=w2v.corpus_total_words,
              epochs=args.epochs)
    seconds = time.perf_counter() - start
    w2v.wv.save_word2vec_format(out_path)
    return seconds


def run_fasttext(args, model, loss, corpus, lr, prefix, subwords):
    ngrams = ["-minn", str(SUBWORDS["minn"]), "-maxn", str(SUBWORDS["maxn"]), "-bucket", str(SUBWORDS["buckets"])] \
        if subwords else ["-minn", "0", "-maxn", "0"]
    command = ["fasttext", model, "-input", corpus, "-output", prefix, "-dim", "100", "-ws", "5", "-neg", "5",
               "-loss", loss, "-t", "1e-3", "-minCount", "5", "-epoch", str(args.epochs), "-thread",
               str(args.threads), "-lr", str(lr), *ngrams, "-verbose", "0"]
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--word2vec", required=True, help="tapegrad's word2vec program")
    parser.add_argument("--models", default="skipgram:ns,cbow:ns,skipgram:hs,cbow:hs")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--glove_epochs", type=int, default=25)
    parser.add_argument("--glove_window", type=int, default=10)
    parser.add_argument("--glove_x_max", type=float, default=10.0)
    parser.add_argument("--out", default="runs/word2vec_compare")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    pairs = gcide_synonyms()
    print(f"GCIDE: {len(pairs)} synonym pairs of single words", flush=True)

    rows = []
    for spec in args.models.split(","):
        model, loss, subwords = parse_spec(spec)
        for seed in range(args.seeds):
            tag = f"{model}_{loss}{'_subwords' if subwords else ''}_s{seed}"
            if model == "glove":
                summary = run_tapegrad(args, model, "ns", seed, os.path.join(args.out, "tapegrad_" + tag),
                                       args.glove_epochs,
                                       ["--window", str(args.glove_window), "--x_max", str(args.glove_x_max)])
                runs = {"tapegrad": (summary["train_seconds"], summary["vectors_path"])}
                words = summary["train_words"] * args.glove_epochs
            else:
                extra = [item for key, value in SUBWORDS.items() for item in (f"--{key}", str(value))] \
                    if subwords else []
                summary = run_tapegrad(args, model, loss, seed, os.path.join(args.out, "tapegrad_" + tag),
                                       args.epochs, extra)
                runs = {"tapegrad": (summary["train_seconds"], summary["vectors_path"])}
                words = summary["train_words"] * args.epochs
                add_other_tools(args, model, loss, seed, tag, summary["corpus_path"], subwords, runs)
            for tool, (seconds, vectors) in runs.items():
                row = {"tool": tool, "model": model, "loss": loss, "subwords": subwords, "seed": seed,
                       "seconds": seconds, "words_per_second": words / seconds}
                row.update(synonym_quality(vectors, pairs))
                rows.append(row)
                print(json.dumps(row), flush=True)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"threads": args.threads, "epochs": args.epochs, "rows": rows}, f, indent=2)
    print_table(args, rows)


def parse_spec(spec):
    """model[:loss[:subwords]] -> (model, loss, subwords); loss "-" for GloVe."""
    parts = spec.split(":")
    if len(parts) > 3 or (len(parts) == 3 and parts[2] != "subwords"):
        sys.exit(f"compare.py: expected model[:loss[:subwords]], got {spec!r}")
    return parts[0], parts[1] if len(parts) > 1 else "-", len(parts) == 3


def add_other_tools(args, model, loss, seed, tag, corpus, subwords, runs):
    """gensim's and fastText's runs of the same model on tapegrad's corpus file, into runs."""
    lr = 0.05 if model == "cbow" else 0.025
    gensim_vectors = os.path.join(args.out, "gensim_" + tag + ".txt")
    runs["gensim"] = (run_gensim(args, model, loss, seed, corpus, lr, gensim_vectors, subwords), gensim_vectors)
    prefix = os.path.join(args.out, "fasttext_" + tag)
    runs["fasttext"] = (run_fasttext(args, model, loss, corpus, lr, prefix, subwords), prefix + ".vec")


def print_table(args, rows):
    def spread(values, fmt):
        mean = statistics.mean(values)
        if len(values) < 2:
            return fmt.format(mean)
        return (fmt + " ± " + fmt).format(mean, statistics.stdev(values))

    print("\n| model | tool | words/s | seconds | synonym percentile | synonym in top 10 |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for spec in args.models.split(","):
        model, loss, subwords = parse_spec(spec)
        for tool in ("tapegrad", "gensim", "fasttext"):
            sel = [r for r in rows
                   if r["tool"] == tool and r["model"] == model and r["loss"] == loss and r["subwords"] == subwords]
            if not sel:
                continue
            label = f"{model} {'' if loss == '-' else loss}{' subwords' if subwords else ''}"
            print(f"| {label} | {tool} | {spread([r['words_per_second'] / 1000 for r in sel], '{:.0f}k')} | "
                  f"{spread([r['seconds'] for r in sel], '{:.1f}')} | "
                  f"{spread([r['synonym_percentile'] for r in sel], '{:.3f}')} | "
                  f"{spread([r['synonym_top10'] for r in sel], '{:.3f}')} |")


if __name__ == "__main__":
    main()
