# Writes a copy of a JSON object file with some top-level fields changed, for
# the config cases of cases.ini. Usage: json-edit.py IN OUT EDIT...; an edit
# KEY=JSON sets the field to the JSON value, KEY= removes it.
import json
import sys

doc = json.load(open(sys.argv[1]))
for edit in sys.argv[3:]:
    key, _, value = edit.partition("=")
    if value:
        doc[key] = json.loads(value)
    else:
        doc.pop(key, None)
json.dump(doc, open(sys.argv[2], "w"), indent=2)
