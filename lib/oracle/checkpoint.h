// A checkpoint as Hugging Face publishes it, opened for reading: one
// .safetensors file, a shard index (model.safetensors.index.json, whose
// weight_map names the shard file of every tensor) with its shards, or a
// model directory (its index if it has one, else its one .safetensors file).
// Every shard is memory-mapped, never read whole: opening reads the headers
// (and the few bytes of bool tensors) and checks them, and a tensor's bytes
// are read only where they are used, copied once to a device buffer or into
// a host Tensor for the oracle. Every tensor is found through the index. The
// graph side: bindCheckpoint checks every weight a graph declares against the
// checkpoint and lists the checkpoint's tensors the graph does not use (a
// warning for a tool to print: checkpoints carry extra ones). LoadProgress
// and loadSummary word what a tool prints about a large load. Every error is
// typed and names the file, and the tensor where there is one.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/diag.h"
#include "ir/graph.h"
#include "oracle/tensor.h"

namespace poot {

// One tensor of a checkpoint: its type and its bytes in the shard's mapping
// (valid while any copy of the Checkpoint lives).
struct CheckpointTensor {
  Type type;
  const uint8_t* data = nullptr;
  int64_t bytes = 0;
  int32_t shard = 0;    // index into Checkpoint::files()
  uint64_t offset = 0;  // of its first byte in that file
};

class Checkpoint {
 public:
  // PATH is a .safetensors file, an index (a name ending in .json) or a
  // directory. Refused, with nothing left open: a path that is none of
  // these or cannot be read (Io); a directory with no index and no or
  // several .safetensors files (Io, Format); an index that is not JSON, has
  // no weight_map object, maps a tensor to anything but a relative file name
  // or names a tensor twice (Format, "malformed index"); a shard that cannot
  // be opened (Io, naming the shard and a tensor the index puts there); a
  // shard whose header fails a check of safetensors.h (Format); a tensor in
  // two shards, a tensor the index puts in a shard that does not hold it, or
  // one a shard holds that the index does not name (Format).
  static Expected<Checkpoint> open(const std::string& path);

  const std::string& path() const;               // as named
  const std::vector<std::string>& files() const; // the shards, in name order
  bool sharded() const;                          // opened through an index
  // Every tensor by name.
  const std::map<std::string, CheckpointTensor>& tensors() const;
  const CheckpointTensor* find(const std::string& name) const;
  int64_t bytes() const;  // of every tensor
  const std::string& fileOf(const CheckpointTensor& t) const { return files()[size_t(t.shard)]; }
  // A host copy of one tensor.
  Tensor read(const CheckpointTensor& t) const;
  // Drops the tensor's pages from this process's memory once its bytes are
  // where they are needed (a device buffer); they stay valid and are read
  // from the file again if used. So a load's resident memory stays small.
  void release(const CheckpointTensor& t) const;

 private:
  Checkpoint() = default;
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

// The weight_map of a shard index's text (tensor name -> shard file name, as
// written), checked as Checkpoint::open describes; `file` is used in
// diagnostics only.
Expected<std::map<std::string, std::string>> parseShardIndex(const std::string& text, const std::string& file);

// What a graph takes from a checkpoint: every weight it declares, checked
// (checkWeight: the exact dtype and shape), in the order their bytes lie on
// disk (shard, then offset), and the checkpoint's tensors no weight names,
// in name order.
struct CheckpointBinding {
  std::vector<std::pair<std::string, const CheckpointTensor*>> weights;
  std::vector<std::string> unused;
  int64_t bytes = 0;  // of the bound weights
};

// A graph weight the checkpoint lacks is an ErrorKind::Bind error at the
// path the user named ("... is missing from the file", or "from the index";
// a file named alone beside an index says so).
Expected<CheckpointBinding> bindCheckpoint(const Graph& g, const Checkpoint& c);

// Loads of at least this many bytes get progress lines.
inline constexpr int64_t kProgressBytes = 1'000'000'000;

// One line each time another tenth of `total` bytes is done, for loads of at
// least `threshold` bytes: "loading weights: 3.21 of 16.06 GB (20%)".
class LoadProgress {
 public:
  explicit LoadProgress(int64_t total, int64_t threshold = kProgressBytes) : total_(total), threshold_(threshold) {}
  std::optional<std::string> advance(int64_t done);

 private:
  int64_t total_, threshold_;
  int64_t tenths_ = 0;  // tenths already reported
};

// "1.50 GB", "12.3 MB", "4.0 kB", "512 bytes" (decimal units).
std::string formatBytes(int64_t bytes);
// "loaded 16.06 GB of weights from 4 files in 6.10 s (2.63 GB/s)".
std::string loadSummary(int64_t bytes, size_t files, double seconds);

}  // namespace poot
