// The plans of one model an engine serves, checked to fit together before
// any device is opened: a paged prefill plan and a paged decode plan (pootc
// trace --kv paged), each a step over the slots tokens, pos (one a row),
// read and write with the output logits and no other per-call parameter, the decode
// plan one token a row, and optionally a mixed plan (--phase mixed: its
// tokens each at their own position and read-map row, the slots row and
// sample besides), all with the same capacity, vocabulary, pool, states and
// weights. What the plans can serve decides which requests are
// valid (checkRequest), so a caller can refuse bad requests before it opens
// a device. Errors are Bind errors naming the plan's file.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/sample.h"
#include "ir/diag.h"
#include "kv/result.h"
#include "oracle/lora.h"
#include "runtime/plan_reader.h"
#include "runtime/signature.h"

namespace poot::engine {

// What the engine needs to know of a paged plan's source graph.
// rows and tokens are the batch rows and tokens a row, or in a mixed plan
// the sequences (the read map's and the logits' rows) and the tokens in all.
struct PagedShape {
  bool mixed = false;
  bool next = false;  // the output `next` (pootc trace --next-token): each logits row's greedy token
  int64_t rows = 0, tokens = 0, capacity = 0, vocab = 0, poolSlots = 0;
  std::map<std::string, Type> states, weights;
};

// What a request asks of the engine.
struct Request {
  std::vector<int32_t> prompt;
  SampleOptions sampling;                   // greedy unless a temperature is given
  std::set<int32_t> stop;                   // end-of-sequence ids, kept in the output
  int32_t maxNew = 16;                      // tokens to generate, at least 1
  uint64_t identity = AdapterSet::kBase;    // the weights it runs on (ModelWeights::adapters)
};

class ModelPlans {
 public:
  // `prefillName`, `decodeName` and `mixedName` name the plans in
  // diagnostics (their files). The mixed plan is optional.
  static Expected<ModelPlans> check(rt::PlanFile prefill, const std::string& prefillName, rt::PlanFile decode,
                                    const std::string& decodeName, std::optional<rt::PlanFile> mixed = {},
                                    const std::string& mixedName = {});
  // Reads the plan files (each refused unless signed by one of `trusted`,
  // when any is given: rt::loadPlanFile; no mixed plan where mixedPath is
  // empty), then checks them.
  static Expected<ModelPlans> load(const std::string& prefillPath, const std::string& decodePath,
                                   const rt::TrustedKeys& trusted, const std::string& mixedPath = {});

  const PagedShape& prefill() const { return prefillShape_; }
  const PagedShape& decode() const { return decodeShape_; }
  const std::optional<PagedShape>& mixed() const { return mixedShape_; }
  // The prefill plan's source graph (its weights are the decode plan's too).
  const Graph& graph() const { return prefillFile_.source; }
  int32_t poolBlocks() const;

 private:
  friend class Engine;  // takes the files for its sessions
  ModelPlans() = default;
  rt::PlanFile prefillFile_, decodeFile_;
  std::optional<rt::PlanFile> mixedFile_;
  PagedShape prefillShape_, decodeShape_;
  std::optional<PagedShape> mixedShape_;
};

// Whether plans of this shape (either plan's: they agree) can serve a
// request, the identity aside: a prompt of ids in [0, vocab) (Range), a
// maxNew of at least 1 and sampling options in range (Usage: temperature
// finite and at least 0, top_p in (0, 1]), and the prompt with its maxNew - 1
// more tokens within the capacity and the pool (Range, kv::checkRequest's
// message).
Status checkRequest(const PagedShape& shape, const Request& request);

// A KV driver error as a diagnostic: a request that does not fit (Capacity,
// OutOfBlocks) is a Range error, a bad request or an unknown one a Usage
// error, the rest (the driver refusing its own steps) Bind; at loc.
Error kvError(const kv::KvError& e, Loc loc = {});

}  // namespace poot::engine
