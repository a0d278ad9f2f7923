#!/usr/bin/env bash
# Byte-level BPE (tapegrad's data::BpeTokenizer) against sentencepiece's BPE on one text file, at
# one vocabulary size: training seconds, encoding MB/s and tokens per byte, side by side.
#
#   bench/bpe_compare.sh [TEXT] [VOCAB]     # defaults: runs/word2vec/corpus.txt, 8000
#
# TEXT defaults to the word2vec example's corpus.txt (build/examples/word2vec writes it). Needs
# Debian's sentencepiece (spm_train) and python3-sentencepiece (in-process encoding, so neither side
# pays for reading or printing). tapegrad encodes with one thread; sentencepiece's batch encode is
# timed with one thread and with two. Medians of 5 encodings of the whole text.
set -euo pipefail
text="${1:-runs/word2vec/corpus.txt}"
vocab="${2:-8000}"
bench="${BPE_BENCH:-build/bench/bpe_bench}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
[[ -f "$text" ]] || { echo "bpe_compare: $text is missing (run build/examples/word2vec first)" >&2; exit 1; }

echo "tapegrad: $("$bench" --text "$text" --vocab "$vocab" --runs 5 --model "$work/bpe.json")"
start=$(date +%s.%N)
spm_train --input="$text" --model_prefix="$work/spm" --vocab_size="$vocab" --model_type=bpe \
  --character_coverage=1.0 --num_threads=2 --minloglevel=2 > /dev/null 2>&1
end=$(date +%s.%N)
/usr/bin/python3 - "$text" "$work/spm.model" "$start" "$end" <<'PY'
import json, statistics, sys, time
import sentencepiece as spm
text_path, model = sys.argv[1], sys.argv[2]
train_seconds = float(sys.argv[4]) - float(sys.argv[3])
sp = spm.SentencePieceProcessor(model_file=model)
lines = open(text_path, encoding="utf-8").read().split("\n")
size = sum(len(line.encode()) + 1 for line in lines)
result = {"bytes": size, "vocab_size": sp.get_piece_size(), "train_seconds": train_seconds}
for threads in (1, 2):
    times = []
    for _ in range(5):
        start = time.perf_counter()
        ids = sp.encode(lines, num_threads=threads)
        times.append(time.perf_counter() - start)
    result[f"encode_mb_per_s_{threads}_threads"] = size / 1e6 / statistics.median(times)
result["tokens_per_byte"] = sum(len(x) for x in ids) / size
print("sentencepiece: " + json.dumps(result))
PY
