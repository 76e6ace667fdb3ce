// Serving through poot's C API: an engine over a paged prefill plan and a
// paged decode plan (pootc trace --kv paged) on Vulkan, with a checkpoint.
// Each line of standard input is a prompt (token ids separated by spaces);
// all are submitted, greedy, MAX_NEW tokens each, and the engine is stepped
// until every request has ended, its tokens taken from the event queue as
// they come. Then each request's tokens are printed, one line a request in
// the input's order, as `poot generate --output` lists them.
//
//   serve PREFILL_PLAN DECODE_PLAN CHECKPOINT MAX_NEW < prompts.txt
#include <poot/poot.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

void check(poot_status s, const char* what) {
  if (s == POOT_OK) return;
  std::fprintf(stderr, "serve: %s failed (status %d): %s\n", what, int(s), poot_last_error());
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: serve PREFILL_PLAN DECODE_PLAN CHECKPOINT MAX_NEW < prompts.txt\n");
    return 2;
  }
  poot_plan *prefill = nullptr, *decode = nullptr;
  check(poot_plan_load(argv[1], &prefill), "poot_plan_load");
  check(poot_plan_load(argv[2], &decode), "poot_plan_load");
  poot_engine* engine = nullptr;
  check(poot_engine_create(prefill, decode, nullptr, "vulkan", nullptr, 0, argv[3], 1, &engine), "poot_engine_create");

  std::vector<std::vector<int32_t>> tokens;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::vector<int32_t> prompt;
    std::istringstream words(line);
    for (int32_t id; words >> id;) prompt.push_back(id);
    poot_request request = {prompt.data(), prompt.size(), int32_t(std::atoi(argv[4])), nullptr, 0, 0.0, 1.0, 0, 0.0, 1.0, 0.0, 0.0, 0, nullptr};
    int64_t id = 0;
    check(poot_engine_submit(engine, &request, &id), "poot_engine_submit");
    tokens.emplace_back();
  }
  size_t ended = 0;
  for (int ran = 1; ran;) {
    check(poot_engine_step(engine, &ran), "poot_engine_step");
    poot_event events[16];
    size_t count = 0;
    do {
      check(poot_engine_poll(engine, events, 16, &count), "poot_engine_poll");
      for (size_t i = 0; i < count; ++i) {
        tokens[size_t(events[i].request)].push_back(events[i].token);
        ended += events[i].finish != POOT_FINISH_NONE;
      }
    } while (count == 16);
  }
  if (ended != tokens.size()) {
    std::fprintf(stderr, "serve: %zu of %zu requests ended\n", ended, tokens.size());
    return 1;
  }
  for (const auto& t : tokens) {
    for (size_t i = 0; i < t.size(); ++i) std::printf("%s%d", i ? " " : "", int(t[i]));
    std::printf("\n");
  }
  poot_engine_free(engine);
  poot_plan_free(decode);
  poot_plan_free(prefill);
  return 0;
}
