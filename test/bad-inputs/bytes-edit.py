# Writes a changed copy of a file's bytes, for the cases of cases.ini that
# need a malformed binary input. Usage: bytes-edit.py IN OUT EDIT...; the
# edits, in order:
#   cut N            keep the first N bytes (a negative N drops the last -N)
#   replace OLD NEW  replace the first occurrence of the text OLD by NEW
#                    (Python escapes such as \x00 allowed in both)
#   append TEXT      add TEXT (escapes allowed) at the end
import sys


def text(s):
    return s.encode("latin-1").decode("unicode_escape").encode("latin-1")


b = open(sys.argv[1], "rb").read()
args = sys.argv[3:]
while args:
    op = args.pop(0)
    if op == "cut":
        b = b[: int(args.pop(0))]
    elif op == "replace":
        old, new = text(args.pop(0)), text(args.pop(0))
        assert old in b, "text not found"
        b = b.replace(old, new, 1)
    elif op == "append":
        b += text(args.pop(0))
    else:
        sys.exit("bytes-edit.py: unknown edit " + op)
open(sys.argv[2], "wb").write(b)
