# Writes the .npy fixtures beside this file with real NumPy, so that the unit
# tests (test/unit/npy_test.cpp) read what NumPy itself writes, not only what
# our own writer does. The files are tiny and committed; this script is the
# record of how they were made (Debian 12's python3-numpy 1.24.2:
# `/usr/bin/python3 test/unit/Inputs/make_npy_fixtures.py`). NumPy has no
# bfloat16, so the bf16 file is uint16 bit patterns viewed as 2-byte void,
# which NumPy saves under descr '|V2'.
import os

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))


def save(name, array, version=None):
    path = os.path.join(here, name)
    if version is None:
        np.save(path, array)
    else:
        with open(path, "wb") as f:
            np.lib.format.write_array(f, array, version=version)


save("npy_scalar_f32.npy", np.array(1.5, dtype=np.float32))
save("npy_i64_1d.npy", np.array([-3, 0, 7, 2**40], dtype=np.int64))
save("npy_f16_2d.npy", np.array([[1.0, -2.5, 0.099975586], [65504.0, -0.0, 6.1035156e-05]], dtype=np.float16))
save("npy_bool.npy", np.array([True, False, False, True, True]))
save("npy_bf16_v2.npy", np.array([0x3F80, 0xC040, 0x0000, 0x7F80], dtype=np.uint16).view("V2"))
save("npy_i32_version2.npy", np.array([[1, -2], [2147483647, -2147483648]], dtype=np.int32), version=(2, 0))
save("npy_f32_big_endian.npy", np.array([1.0, 2.0], dtype=">f4"))
save("npy_f32_fortran.npy", np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))
