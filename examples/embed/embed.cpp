// A decode loop through poot's C API: load a plan, open a session on
// Vulkan, bind a checkpoint, run one step per token given on the command
// line (the token at position 0, 1, ...; the KV caches carry over from step
// to step on the device), then write the last step's outputs and every
// state's value as raw bytes, OUTDIR/NAME.bin. It assumes a decode plan of
// one input (the token ids, i32[1,1]) and one slot (the position, i32[]),
// as `pootc trace --phase decode` writes them.
//
//   embed PLAN CHECKPOINT OUTDIR TOKEN...
#include <poot/poot.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

// Exits with the library's message when a call fails.
void check(poot_status s, const char* what) {
  if (s == POOT_OK) return;
  std::fprintf(stderr, "embed: %s failed (status %d): %s\n", what, int(s), poot_last_error());
  std::exit(1);
}

// The only parameter of `kind`, which this example requires.
poot_tensor theOne(const poot_plan* plan, poot_kind kind, const char* what) {
  size_t n = 0;
  check(poot_plan_count(plan, kind, &n), "poot_plan_count");
  if (n != 1) {
    std::fprintf(stderr, "embed: the plan has %zu %ss, this example takes a plan of one\n", n, what);
    std::exit(1);
  }
  poot_tensor t;
  check(poot_plan_param(plan, kind, 0, &t), "poot_plan_param");
  return t;
}

void write(const std::string& dir, const poot_tensor& t) {
  std::string path = dir + "/" + t.name + ".bin";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(t.data, 1, t.bytes, f) != t.bytes || std::fclose(f) != 0) {
    std::fprintf(stderr, "embed: cannot write %s\n", path.c_str());
    std::exit(1);
  }
}

// Writes every output or state, as `get` (poot_session_output or
// poot_session_read_state) returns it.
void writeAll(const poot_plan* plan, poot_session* session, poot_kind kind,
              poot_status (*get)(poot_session*, const char*, poot_tensor*), const std::string& dir) {
  size_t n = 0;
  check(poot_plan_count(plan, kind, &n), "poot_plan_count");
  for (size_t i = 0; i < n; ++i) {
    poot_tensor info, t;
    check(poot_plan_param(plan, kind, i, &info), "poot_plan_param");
    check(get(session, info.name, &t), kind == POOT_OUTPUT ? "poot_session_output" : "poot_session_read_state");
    write(dir, t);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: embed PLAN CHECKPOINT OUTDIR TOKEN...\n");
    return 2;
  }
  if (poot_api_version() != POOT_API_VERSION) {
    std::fprintf(stderr, "embed: built for poot API %d, running on %d\n", POOT_API_VERSION, poot_api_version());
    return 1;
  }
  poot_plan* plan = nullptr;
  check(poot_plan_load(argv[1], &plan), "poot_plan_load");
  poot_session* session = nullptr;
  check(poot_session_create(plan, "vulkan", nullptr, 0, &session), "poot_session_create");
  check(poot_session_bind_weights_file(session, argv[2]), "poot_session_bind_weights_file");

  poot_tensor tokens = theOne(plan, POOT_INPUT, "input");
  poot_tensor pos = theOne(plan, POOT_SLOT, "slot");
  for (int i = 4; i < argc; ++i) {
    int32_t token = int32_t(std::atoi(argv[i])), at = int32_t(i - 4);
    poot_tensor inputs[2] = {tokens, pos};
    inputs[0].data = &token;
    inputs[0].bytes = sizeof token;
    inputs[1].data = &at;
    inputs[1].bytes = sizeof at;
    check(poot_session_step(session, inputs, 2), "poot_session_step");
  }

  writeAll(plan, session, POOT_OUTPUT, poot_session_output, argv[3]);
  writeAll(plan, session, POOT_STATE, poot_session_read_state, argv[3]);
  std::printf("ran %d steps of a %s plan for %s\n", argc - 4, poot_plan_target(plan), poot_plan_device(plan));
  poot_session_free(session);
  poot_plan_free(plan);
  return 0;
}
