// .npy files (NumPy format 1.0/2.0, little-endian, C order) to and from
// tensors. Supported: f32 (<f4), f16 (<f2), i32 (<i4), i64 (<i8), bool (|b1),
// and bf16, which NumPy lacks: by the common convention it is stored as its
// 16-bit patterns under descr '<V2' (written so; '|V2', what NumPy itself
// writes for two-byte voids, is read too). Errors are typed (ErrorKind::Format
// / Io) and name the file.
#pragma once

#include <string>

#include "ir/diag.h"
#include "oracle/tensor.h"

namespace poot {

Expected<Tensor> parseNpy(const std::string& bytes, const std::string& file);
Expected<Tensor> readNpy(const std::string& path);
std::string npyBytes(const Tensor& t);
Status writeNpy(const std::string& path, const Tensor& t);  // atomic, see ir/io.h

}  // namespace poot
