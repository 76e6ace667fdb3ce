// A Session runs one loaded plan on one backend, step after step. Creating
// it checks the plan against the live device, allocates every buffer once
// (the arena, and one buffer for each input, weight, state, slot, output and
// witness; views alias their base; temps and scratch are arena ranges),
// builds each kernel once and records the command stream once. States start
// as zeros; weights must be bound before the first step.
//
// The backend (the device) and its buffers outlive any Session: several
// Sessions may run on one backend, and a Session may take some of its
// weights and states from buffers another Session of that backend made
// (SessionOptions::shared, sharedBuffers()), so the plans of one model
// (prefill and decode) hold one copy of the weights and of the KV pools on
// the device and never move them through the host.
//
// The device check: the plan's target must be the backend's, its arch no
// newer than the device's, every kernel's workgroup size and memory, every
// grid, every dispatch's binding count and every binding's bytes within the
// device's limits (Capability errors).
// The plan's device name must be the device's slug or start with it and a
// '-' ("nvidia-h200-vulkan" runs on a device whose slug is "nvidia-h200"),
// else the plan is refused (Capability "Device") unless the caller passes
// allowOtherDevice: a plan tuned for another device runs correctly, only
// not as planned.
//
// A step checks every bind before anything is uploaded or dispatched: every
// input and slot present with its exact dtype and shape (Bind), every slot
// word in its declared range (Range), every word of an integer input that
// reaches a Gather's indices (ir's gatherBound: token ids) in [0, n) for the
// smallest axis n it indexes (Range, naming the input, the word and its
// value), and every paged write map (a slot the
// graph uses as a ScatterUpdate's index) a forward slot map: each word a
// pool slot or -1, no slot named twice (Bind, "slot map ..."). A failed bind
// changes nothing. Then the validation channel: the dispatches up to the
// first that writes a state run first; if a witness is false, the step
// returns a Range error "validation failed: %NAME" and runs nothing more, so
// outputs are not published and every state is as it was. When some witness
// is written only after a state write, the states are copied aside on the
// device before the step and copied back on failure instead.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/diag.h"
#include "oracle/tensor.h"
#include "runtime/backend.h"
#include "runtime/plan_reader.h"

namespace poot::rt {

// A weight's or a state's device buffer that another Session made, and its
// type there.
struct SharedBuffer {
  BufferId buffer = -1;
  Type type;
};

struct SessionOptions {
  bool allowOtherDevice = false;  // run a plan whose device name is not this device's
  // Weights and states, by name, that live in these buffers of the same
  // backend instead of buffers of the Session's own: the Session neither
  // allocates nor zeroes them, and a shared weight counts as bound (the
  // Session that made it binds it). A name the plan has no weight or state
  // of, or a type other than the plan's, is a Bind error.
  std::map<std::string, SharedBuffer> shared;
};

// The device check above, which Session::create makes first.
Status checkDevice(const PlanFile& plan, const DeviceInfo& device, const SessionOptions& opts = {});

// Builds each kernel of the plan that a dispatch runs, once, for the
// binding count of its dispatches: the backend's ids in plan order, -1 for
// a kernel no dispatch runs.
Expected<std::vector<KernelId>> buildKernels(const PlanFile& plan, Backend& backend);

// One weight's bytes, wherever they are: a host Tensor, or a tensor of a
// mapped checkpoint (oracle/checkpoint.h), uploaded from there directly.
struct WeightBytes {
  std::string name;  // the source graph's weight name
  Type type;
  const void* data = nullptr;
  int64_t bytes = 0;
};

// What one bindWeights moved to the device.
struct WeightLoad {
  int64_t bytes = 0;
  double seconds = 0;  // wall time of the uploads
};

struct StepResult {
  std::map<std::string, Tensor> outputs;  // by the graph's output names
  double seconds = 0;                     // wall time of the submitted programs
  std::optional<double> deviceSeconds;    // their device time, where the backend measures it
  // A profiled step's device time of each dispatch, in plan order (of the
  // ones that ran: a failed witness stops the step after the first phase).
  std::vector<double> dispatchSeconds;
};

class Session {
 public:
  static Expected<std::unique_ptr<Session>> create(PlanFile plan, std::shared_ptr<Backend> backend,
                                                   SessionOptions opts = {});

  const PlanFile& plan() const { return plan_; }
  Backend& backend() { return *backend_; }

  // Binds weights by name (the source graph's weight names, as in the
  // checkpoint); any subset, all checked before any is uploaded (a weight
  // the plan lacks, or of another dtype, shape or size, is a Bind error and
  // nothing is uploaded). Uploads each once, straight from its bytes, in the
  // order given, calling uploaded(its index, bytes done, bytes in all) after
  // each.
  Expected<WeightLoad> bindWeights(const std::vector<WeightBytes>& weights,
                                   const std::function<void(size_t, int64_t, int64_t)>& uploaded = {});
  Status bindWeights(const std::map<std::string, Tensor>& weights);
  Status setState(const std::string& name, const Tensor& value);
  Expected<Tensor> readState(const std::string& name);

  // One step; `inputs` holds every per-call input and slot, by name. With
  // readOutputs false the outputs stay on the device (StepResult::outputs
  // is empty) for readOutput to take the parts it needs. With `profile` the
  // step runs the same dispatches timed one by one (Backend::recordProfiled,
  // recorded on the first such step; its Capability error "Profile" where
  // the device cannot), into StepResult::dispatchSeconds.
  Expected<StepResult> step(const std::map<std::string, Tensor>& inputs, bool readOutputs = true,
                            bool profile = false);

  // Elements [first, first + count) of output `name` as the last step left
  // it (row-major), their bytes into `into` (count elements of the output's
  // dtype), which the caller may keep from step to step: a sampler needs
  // one row of logits a sequence, not the whole of a prefill's, and no
  // fresh buffer for them. A name the plan does not export is a Bind error,
  // elements outside the output a Range error.
  Status readOutput(const std::string& name, int64_t first, int64_t count, void* into);

  // Every weight and state buffer of the Session by name, its own and those
  // it shares, for another Session of the same backend to share.
  std::map<std::string, SharedBuffer> sharedBuffers() const;

  // Whether failed witnesses are handled by copying the states aside (some
  // witness is written after a state write) rather than by running the
  // witnesses' dispatches first.
  bool copiesStates() const { return !stateBackup_.empty(); }

 private:
  Session(PlanFile plan, std::shared_ptr<Backend> backend) : plan_(std::move(plan)), backend_(std::move(backend)) {}
  Status build(const std::map<std::string, SharedBuffer>& shared);
  Status checkBinds(const std::map<std::string, Tensor>& inputs) const;
  Status upload(int32_t buffer, const Tensor& t);
  Expected<Tensor> download(int32_t buffer);
  BufferRange rangeOf(int32_t buffer) const;
  int32_t findBuffer(const std::string& name, Role role) const;
  Status copyStates(bool restore);

  PlanFile plan_;
  std::shared_ptr<Backend> backend_;
  BufferId arena_ = -1;
  std::vector<BufferId> own_;          // per plan buffer: its own backend buffer, or -1
  std::vector<ProgramId> phases_;      // run in order; witnesses checked after the first
  std::vector<std::vector<DispatchCommand>> phaseCommands_;  // what each phase records
  std::vector<ProgramId> profiled_;    // the phases timed dispatch by dispatch, once recorded
  std::vector<BufferId> stateBackup_;  // per state buffer, in plan order, when copiesStates()
  std::vector<int32_t> states_;        // plan buffers of role State
  std::map<int32_t, int64_t> writeMaps_;  // slot buffer -> pool slots, for paged write maps
  std::map<int32_t, int64_t> indexBounds_;  // input buffer -> the Gather axis its words index
  std::vector<bool> weightBound_;      // per plan buffer
};

}  // namespace poot::rt
