"""Writes DIR/tokenizer.json: a byte-level BPE tokenizer for a model that
has no published one. Ids 0..255 are the 256 byte tokens (no merges): the
vocabulary of the tiny example models (vocab_size 256), so text in and out
of a tiny model goes through it, any UTF-8 text one token a byte. With
VOCAB above 256 (the serving benchmark's random Llama-3-8B: 128256), every
id from 256 on is a string of two or more ASCII letters and digits (all
pairs first, then all triples, ...), so each decodes to its own short piece
of plain text; encoding text still gives byte tokens only, which is all a
server needs when requests send token ids. Usage: byte-tokenizer.py DIR [VOCAB]"""
import itertools
import json
import os
import string
import sys

if len(sys.argv) not in (2, 3):
    sys.exit(__doc__)
out, size = sys.argv[1], int(sys.argv[2]) if len(sys.argv) == 3 else 256
if size < 256:
    sys.exit("VOCAB must be at least 256 (the byte tokens)")
vocab, extra = {}, 0
for b in range(256):
    printable = 33 <= b <= 126 or 161 <= b <= 172 or b >= 174
    vocab[chr(b) if printable else chr(256 + extra)] = b
    extra += not printable
alphabet = string.ascii_letters + string.digits
for n in itertools.count(2):
    if len(vocab) == size:
        break
    for t in itertools.product(alphabet, repeat=n):
        if len(vocab) == size:
            break
        vocab["".join(t)] = len(vocab)
tok = {
    "version": "1.0",
    "added_tokens": [],
    "normalizer": None,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
    "post_processor": None,
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "vocab": vocab, "merges": []},
}
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
    json.dump(tok, f, ensure_ascii=False)
