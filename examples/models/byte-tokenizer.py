"""Writes DIR/tokenizer.json: a byte-level BPE tokenizer with the 256 byte
tokens alone (ids 0..255 the bytes, no merges), the vocabulary of the tiny
example models (vocab_size 256), which have no published tokenizer. Text in
and out of a tiny model goes through it: any UTF-8 text encodes, one token a
byte. Usage: byte-tokenizer.py DIR"""
import json
import os
import sys

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
vocab, extra = {}, 0
for b in range(256):
    printable = 33 <= b <= 126 or 161 <= b <= 172 or b >= 174
    vocab[chr(b) if printable else chr(256 + extra)] = b
    extra += not printable
tok = {
    "version": "1.0",
    "added_tokens": [],
    "normalizer": None,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
    "post_processor": None,
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "vocab": vocab, "merges": []},
}
with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
    json.dump(tok, f, ensure_ascii=False)
