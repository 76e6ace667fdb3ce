"""The .npy files the oracle tests write and read, without numpy: int32
inputs for `pootc eval` and its float32 outputs."""
import ast
import struct


def write_i32(path, shape, values):
    header = "{'descr': '<i4', 'fortran_order': False, 'shape': (%s), }" % "".join("%d," % d for d in shape)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(struct.pack("<%di" % len(values), *values))


def read_f32(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<H", data[8:10])[0]
    header = ast.literal_eval(data[10:10 + n].decode("latin1"))
    assert header["descr"] == "<f4", header
    body = data[10 + n:]
    return tuple(header["shape"]), struct.unpack("<%df" % (len(body) // 4), body)
