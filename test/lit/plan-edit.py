# Edits the bytes of a plan file, for the tests of what the runtime does with
# a changed plan. Usage: plan-edit.py IN OUT EDIT...; the edits, in order:
#   flip PATTERN DELTA  xor 0x01 into the byte DELTA bytes after the first
#                       occurrence of PATTERN (hex digits)
#   f64 OLD NEW         replace every little-endian f64 OLD by NEW
#   reseal              write the checksum the edited bytes have, as
#                       docs/plan-file.md defines it: FNV-1a 64 over every
#                       byte, the checksum field's own 8 counted as zeros
import struct
import sys

CHECKSUM_FIELD = 11  # Plan.checksum's field index in schemas/plan.fbs


def checksum_at(b):
    root = struct.unpack_from("<I", b, 0)[0]
    vtable = root - struct.unpack_from("<i", b, root)[0]
    slot = 4 + 2 * CHECKSUM_FIELD
    assert slot < struct.unpack_from("<H", b, vtable)[0], "the plan has no checksum field"
    field = struct.unpack_from("<H", b, vtable + slot)[0]
    assert field, "the plan has no checksum field"
    return root + field


def fnv1a(data):
    h = 0xCBF29CE484222325
    for c in data:
        h = ((h ^ c) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


b = bytearray(open(sys.argv[1], "rb").read())
args = sys.argv[3:]
while args:
    op = args.pop(0)
    if op == "flip":
        pattern, delta = bytes.fromhex(args.pop(0)), int(args.pop(0))
        at = b.find(pattern)
        assert at >= 0, "pattern not found"
        b[at + delta] ^= 0x01
    elif op == "f64":
        old, new = struct.pack("<d", float(args.pop(0))), struct.pack("<d", float(args.pop(0)))
        assert b.find(old) >= 0, "value not found"
        b = bytearray(bytes(b).replace(old, new))
    elif op == "reseal":
        at = checksum_at(b)
        b[at:at + 8] = bytes(8)
        struct.pack_into("<Q", b, at, fnv1a(b))
    else:
        sys.exit("plan-edit.py: unknown edit " + op)
open(sys.argv[2], "wb").write(b)
