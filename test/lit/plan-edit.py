# Edits the bytes of a plan file, for the tests of what the runtime does with
# a changed plan. Usage: plan-edit.py IN OUT EDIT...; the edits, in order:
#   flip PATTERN DELTA  xor 0x01 into the byte DELTA bytes after the first
#                       occurrence of PATTERN (hex digits)
#   f64 OLD NEW         replace every little-endian f64 OLD by NEW
#   export I N          point output I's record at buffer N (the record
#                       must store a buffer index: its old one not 0)
#   kernel D K          point dispatch D at kernel K (its record must store
#                       a kernel index: its old one not 0)
#   swap D I J          swap bindings I and J of dispatch D
#   grid D X Y Z        set dispatch D's grid
#   drop D              remove dispatch D
#   order D E           swap dispatches D and E in the execution order
#   slot-hi I HI        set the top of slot I's declared range
#   word K I V          set word I of kernel K's blob (SPIR-V) to V
#   reseal              write the checksum the edited bytes have, as
#                       docs/plan-file.md defines it: FNV-1a 64 over every
#                       byte, the checksum field's own 8 counted as zeros
import struct
import sys

CHECKSUM_FIELD = 11  # Plan.checksum's field index in schemas/plan.fbs
OUTPUTS_FIELD = 8    # Plan.outputs
DISPATCHES_FIELD = 6 # Plan.dispatches
SLOTS_FIELD = 7      # Plan.slots
EXPORT_BUFFER = 1    # Export.buffer
DISPATCH_KERNEL, DISPATCH_GRID, DISPATCH_BINDINGS = 0, 2, 3
SLOT_HI = 3
KERNELS_FIELD = 5    # Plan.kernels
KERNEL_BLOB = 2      # Kernel.blob


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


def vector(b, field):
    """Where the root's vector `field` starts (its length word) and its length."""
    at = deref(b, field_at(b, struct.unpack_from("<I", b, 0)[0], field))
    return at, struct.unpack_from("<I", b, at)[0]


def element(b, field, i):
    """Where table i of the root's vector `field` is."""
    at, n = vector(b, field)
    assert i < n, "no such record"
    return deref(b, at + 4 + 4 * i)


def stored(b, table, index):
    at = field_at(b, table, index)
    assert at is not None, "the record does not store that field (it has its default)"
    return at


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
    elif op == "kernel":
        d, k = int(args.pop(0)), int(args.pop(0))
        struct.pack_into("<i", b, stored(b, element(b, DISPATCHES_FIELD, d), DISPATCH_KERNEL), k)
    elif op == "swap":
        d, i, j = (int(args.pop(0)) for _ in range(3))
        at = deref(b, stored(b, element(b, DISPATCHES_FIELD, d), DISPATCH_BINDINGS))
        n = struct.unpack_from("<I", b, at)[0]
        assert i < n and j < n, "no such binding"
        x, y = (struct.unpack_from("<i", b, at + 4 + 4 * k)[0] for k in (i, j))
        struct.pack_into("<i", b, at + 4 + 4 * i, y)
        struct.pack_into("<i", b, at + 4 + 4 * j, x)
    elif op == "grid":
        d = int(args.pop(0))
        at = deref(b, stored(b, element(b, DISPATCHES_FIELD, d), DISPATCH_GRID))
        for k in range(3):
            struct.pack_into("<q", b, at + 4 + 8 * k, int(args.pop(0)))
    elif op in ("drop", "order"):
        at, n = vector(b, DISPATCHES_FIELD)
        targets = [deref(b, at + 4 + 4 * k) for k in range(n)]
        if op == "drop":
            del targets[int(args.pop(0))]
        else:
            d, e = int(args.pop(0)), int(args.pop(0))
            targets[d], targets[e] = targets[e], targets[d]
        struct.pack_into("<I", b, at, len(targets))
        for k, t in enumerate(targets):
            struct.pack_into("<I", b, at + 4 + 4 * k, t - (at + 4 + 4 * k))
    elif op == "slot-hi":
        i, hi = int(args.pop(0)), int(args.pop(0))
        struct.pack_into("<q", b, stored(b, element(b, SLOTS_FIELD, i), SLOT_HI), hi)
    elif op == "word":
        k, i, v = (int(args.pop(0), 0) for _ in range(3))
        at = deref(b, stored(b, element(b, KERNELS_FIELD, k), KERNEL_BLOB))
        assert 4 * i + 4 <= struct.unpack_from("<I", b, at)[0], "no such word"
        struct.pack_into("<I", b, at + 4 + 4 * i, v)
    elif op == "reseal":
        at = checksum_at(b)
        b[at:at + 8] = bytes(8)
        struct.pack_into("<Q", b, at, fnv1a(b))
    else:
        sys.exit("plan-edit.py: unknown edit " + op)
open(sys.argv[2], "wb").write(b)
