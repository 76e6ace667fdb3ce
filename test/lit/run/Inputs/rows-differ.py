# rows-differ.py A.npy B.npy AXIS: the indices along AXIS where two f32
# .npy files of one shape differ (read without numpy), as "differ at [i, ...]".
import ast
import struct
import sys


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data[:6] == b"\x93NUMPY", path
    if data[6] == 1:
        n, start = struct.unpack("<H", data[8:10])[0], 10
    else:
        n, start = struct.unpack("<I", data[8:12])[0], 12
    header = ast.literal_eval(data[start:start + n].decode("latin1"))
    assert header["descr"] == "<f4" and not header["fortran_order"], header
    body = data[start + n:]
    return tuple(header["shape"]), struct.unpack("<%di" % (len(body) // 4), body)


(sa, a), (sb, b) = load(sys.argv[1]), load(sys.argv[2])
axis = int(sys.argv[3])
assert sa == sb, (sa, sb)
inner = 1
for d in sa[axis + 1:]:
    inner *= d
differ = sorted({(i // inner) % sa[axis] for i in range(len(a)) if a[i] != b[i]})
print("differ at [%s]" % ", ".join(map(str, differ)))
