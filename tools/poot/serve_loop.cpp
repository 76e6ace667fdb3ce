// The loop takes the queue's submissions and cancellations under its lock,
// then works on the engine without it, so handlers never wait for a step.
// It sleeps only when nothing is queued and the engine has nothing to run.
#include "serve_loop.h"

#include <cstdio>

namespace poot {

Generation::Update Generation::wait(size_t have, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout,
               [&] { return state_.tokens.size() > have || state_.finish != kv::Finish::None || !state_.error.empty(); });
  return state_;
}

void Generation::add(const engine::TokenEvent& e) {
  {
    std::lock_guard lock(mu_);
    if (e.token >= 0) state_.tokens.push_back(e.token);
    if (e.logprobs) state_.logprobs.push_back(*e.logprobs);
    state_.finish = e.finish;
  }
  cv_.notify_all();
}

void Generation::fail(const std::string& error) {
  {
    std::lock_guard lock(mu_);
    state_.error = error;
    state_.finish = kv::Finish::Cancelled;
  }
  cv_.notify_all();
}

Expected<std::unique_ptr<EngineLoop>> EngineLoop::create(engine::ModelPlans plans, std::shared_ptr<rt::Backend> backend,
                                                         std::unique_ptr<engine::ModelWeights> weights,
                                                         engine::EngineOptions options,
                                                         std::function<void(const std::string&)> log) {
  std::unique_ptr<EngineLoop> loop(new EngineLoop(std::move(log)));
  EngineLoop* self = loop.get();
  options.onToken = [self](const engine::TokenEvent& e) { self->deliver(e); };
  auto created = engine::Engine::create(std::move(plans), std::move(backend), std::move(weights), std::move(options));
  if (!created) return created.error();
  loop->engine_ = created.take();
  loop->thread_ = std::thread([self] { self->run(); });
  return loop;
}

EngineLoop::~EngineLoop() { stop(); }

std::shared_ptr<Generation> EngineLoop::submit(engine::Request request) {
  auto g = std::make_shared<Generation>(std::move(request));
  {
    std::lock_guard lock(mu_);
    incoming_.push_back(g);
  }
  cv_.notify_one();
  return g;
}

void EngineLoop::cancel(const std::shared_ptr<Generation>& g, const std::string& why) {
  {
    std::lock_guard lock(mu_);
    cancels_.emplace_back(g, why);
  }
  cv_.notify_one();
}

void EngineLoop::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void EngineLoop::deliver(const engine::TokenEvent& e) {
  auto it = live_.find(e.request);
  if (it == live_.end()) return;
  it->second->add(e);
  if (e.finish != kv::Finish::None) live_.erase(it);
}

void EngineLoop::failAll(const std::string& error) {
  auto live = live_;
  for (auto& [index, g] : live) {
    g->fail(error);
    (void)engine_->cancel(index);  // an index the engine gave: refused only when it ended, and then it is not live
  }
  live_.clear();
}

void EngineLoop::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !incoming_.empty() || !cancels_.empty() || !engine_->done(); });
    if (stopping_) break;
    auto incoming = std::move(incoming_);
    auto cancels = std::move(cancels_);
    incoming_.clear();
    cancels_.clear();
    lock.unlock();
    for (const auto& g : incoming) {
      auto index = engine_->submit(g->request_);
      if (!index) {
        g->fail(index.error().message);
        continue;
      }
      g->index_ = *index;
      live_[*index] = g;
    }
    for (const auto& [g, why] : cancels) {
      if (!live_.count(g->index_)) continue;  // ended already, or refused
      bool queued = engine_->queued(g->index_);
      (void)engine_->cancel(g->index_);  // live: the engine ends it and deliver() lets it go
      log_("request " + std::to_string(g->index_) + " cancelled (" + (queued ? "queued, it never ran" : "running") +
           "): " + why + "; " + std::to_string(engine_->blocksAvailable()) + " blocks available");
    }
    auto step = engine_->step();
    if (!step) {
      log_("a step failed, every running request ends: " + step.error().message);
      failAll("the step failed: " + step.error().message);
    } else if (*step) {
      ++steps_;
      if ((*step)->requests > 1) {
        // The host's share: its work around the device's (maps, sampling, bookkeeping).
        const double total = (*step)->seconds + (*step)->hostSeconds;
        char timing[64];
        std::snprintf(timing, sizeof timing, ", %.3f ms, host %.0f%%", total * 1e3,
                      total > 0 ? 100 * (*step)->hostSeconds / total : 0.0);
        log_("step " + std::to_string(steps_) + ": " + kv::planName((*step)->plan) + ", " +
             std::to_string((*step)->requests) + " requests" + timing);
      }
    }
    lock.lock();
  }
  for (const auto& g : incoming_) g->fail("the server is stopping");
  incoming_.clear();
  lock.unlock();
  failAll("the server is stopping");
}

}  // namespace poot
