# select-adapter.py OUTPUT.jsonl [NAME]: the lines of a `poot generate
# --output` whose prompts ran on adapter NAME (without NAME: on the base
# model), renumbered from 0 and without their "adapter" field: what a run of
# those prompts alone writes.
import json
import sys

name = sys.argv[2] if len(sys.argv) > 2 else None
index = 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("adapter") != name:
        continue
    print('{"index": %d, "tokens": [%s]}' % (index, ", ".join(map(str, r["tokens"]))))
    index += 1
