# Edits the bytes of a plan file, for the tests of what the runtime does with
# a changed plan. Usage: plan-edit.py IN OUT EDIT...; the edits, in order:
#   flip PATTERN DELTA  xor 0x01 into the byte DELTA bytes after the first
#                       occurrence of PATTERN (hex digits)
#   f64 OLD NEW         replace every little-endian f64 OLD by NEW
#   export I N          point output I's record at buffer N (the record
#                       must store a buffer index: its old one not 0)
#   reseal              write the checksum the edited bytes have, as
#                       docs/plan-file.md defines it: FNV-1a 64 over every
#                       byte, the checksum field's own 8 counted as zeros
import struct
import sys

CHECKSUM_FIELD = 11  # Plan.checksum's field index in schemas/plan.fbs
OUTPUTS_FIELD = 8    # Plan.outputs
EXPORT_BUFFER = 1    # Export.buffer


def field_at(b, table, index):
    """Where field `index` of the table at `table` is stored, or None."""
    vtable = table - struct.unpack_from("<i", b, table)[0]
    slot = 4 + 2 * index
    if slot >= struct.unpack_from("<H", b, vtable)[0]:
        return None
    field = struct.unpack_from("<H", b, vtable + slot)[0]
    return table + field if field else None


def deref(b, at):
    return at + struct.unpack_from("<I", b, at)[0]


def checksum_at(b):
    at = field_at(b, struct.unpack_from("<I", b, 0)[0], CHECKSUM_FIELD)
    assert at is not None, "the plan has no checksum field"
    return at


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
    elif op == "export":
        i, n = int(args.pop(0)), int(args.pop(0))
        outputs = deref(b, field_at(b, struct.unpack_from("<I", b, 0)[0], OUTPUTS_FIELD))
        assert i < struct.unpack_from("<I", b, outputs)[0], "no such output"
        at = field_at(b, deref(b, outputs + 4 + 4 * i), EXPORT_BUFFER)
        assert at is not None, "the record stores no buffer index to change"
        struct.pack_into("<i", b, at, n)
    elif op == "reseal":
        at = checksum_at(b)
        b[at:at + 8] = bytes(8)
        struct.pack_into("<Q", b, at, fnv1a(b))
    else:
        sys.exit("plan-edit.py: unknown edit " + op)
open(sys.argv[2], "wb").write(b)
