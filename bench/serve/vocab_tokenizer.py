#!/usr/bin/env python3
"""Writes DIR/tokenizer.json: a byte-level BPE tokenizer of VOCAB distinct
tokens for a model that has no published one (the serving benchmark's
random Llama-3-8B, vocabulary 128256). Ids 0..255 are the 256 bytes, spelt
in the byte-level alphabet as examples/models/byte-tokenizer.py spells
them; every id above is a string of two or more ASCII letters and digits
(all pairs first, then all triples, and so on), so each token decodes to
its own short piece of plain text and a streamed chunk is never empty. No
merges: encoding text gives byte tokens only, which is all a server needs
when the requests send token ids, as the benchmark's traces do.
Usage: vocab_tokenizer.py DIR VOCAB"""
import itertools
import json
import os
import string
import sys


def byte_alphabet():
    """The byte-level character of each byte, as byte-tokenizer.py draws it."""
    chars, extra = [], 0
    for b in range(256):
        printable = 33 <= b <= 126 or 161 <= b <= 172 or b >= 174
        chars.append(chr(b) if printable else chr(256 + extra))
        extra += not printable
    return chars


def words(count):
    """`count` distinct strings of at least two letters or digits."""
    letters = string.ascii_letters + string.digits
    out = []
    for n in itertools.count(2):
        for t in itertools.product(letters, repeat=n):
            if len(out) == count:
                return out
            out.append("".join(t))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    out, size = sys.argv[1], int(sys.argv[2])
    if size < 256:
        sys.exit("VOCAB must be at least 256 (the byte tokens)")
    tokens = byte_alphabet() + words(size - 256)
    vocab = {t: i for i, t in enumerate(tokens)}
    assert len(vocab) == size, "the tokens are not distinct"
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


if __name__ == "__main__":
    main()
