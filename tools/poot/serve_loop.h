// The engine loop of `poot serve`: one thread owns the engine and steps it
// while requests are queued or running; the HTTP handler threads hand it
// requests and read their tokens through a Generation each. The engine is
// single-threaded: every call to it (submit, step, cancel) runs on the
// loop's thread, and the handlers only touch the queue and their
// Generations, both under locks.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"

namespace poot {

// One request's tokens as the loop delivers them.
class Generation {
 public:
  explicit Generation(engine::Request request) : request_(std::move(request)) {}

  struct Update {
    std::vector<int32_t> tokens;           // every token so far
    std::vector<TokenLogprobs> logprobs;  // each token's, when the request asked (SampleOptions::logprobs)
    kv::Finish finish = kv::Finish::None;  // how it ended; None: it goes on
    std::string error;                     // why the server ended it (a failed step, a stop), if it did
  };
  // What it has once it holds more than `have` tokens or has ended, or
  // after `timeout`, whichever comes first.
  Update wait(size_t have, std::chrono::milliseconds timeout);

 private:
  friend class EngineLoop;
  void add(const engine::TokenEvent& e);
  void fail(const std::string& error);

  const engine::Request request_;
  int64_t index_ = -1;  // the engine's index for it, once submitted (the loop's thread only)
  std::mutex mu_;
  std::condition_variable cv_;
  Update state_;
};

class EngineLoop {
 public:
  // Creates the engine (its onToken is the loop's) and starts the thread.
  // `log` takes one line at a time, from the loop's thread.
  static Expected<std::unique_ptr<EngineLoop>> create(engine::ModelPlans plans, std::shared_ptr<rt::Backend> backend,
                                                      std::unique_ptr<engine::ModelWeights> weights,
                                                      engine::EngineOptions options,
                                                      std::function<void(const std::string&)> log);
  ~EngineLoop();  // stop()

  // Queues a request for the engine; a request the engine refuses ends at
  // once with its error.
  std::shared_ptr<Generation> submit(engine::Request request);
  // Ends a generation, queued or running (nothing when it has ended); `why`
  // goes to the log.
  void cancel(const std::shared_ptr<Generation>& g, const std::string& why);
  // Ends every generation not ended ("the server is stopping") and joins
  // the thread.
  void stop();

 private:
  explicit EngineLoop(std::function<void(const std::string&)> log) : log_(std::move(log)) {}
  void run();
  void deliver(const engine::TokenEvent& e);
  void failAll(const std::string& error);

  std::function<void(const std::string&)> log_;
  std::unique_ptr<engine::Engine> engine_;
  std::thread thread_;
  std::mutex mu_;  // guards what follows, up to the loop's own state
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Generation>> incoming_;
  std::vector<std::pair<std::shared_ptr<Generation>, std::string>> cancels_;
  bool stopping_ = false;
  // The loop's thread only:
  std::map<int64_t, std::shared_ptr<Generation>> live_;  // by engine index
  int64_t steps_ = 0;
};

}  // namespace poot
