// The batcher: admission against the blocks every live sequence may still
// take (its prompt plus its maxNew - 1 tokens, rounded up to blocks, minus
// what it holds), a wait for a shared prefix a live sequence of the same identity
// is still computing (so the prefix cache can serve it once committed), and
// steps that fill their rows with sequences of one identity at whatever
// positions, the furthest behind first, ties broken by the previous step's
// identity first, then by sequence id, so the same requests always give the
// same steps; with a mixed plan, sampled tokens and prompt chunks of that
// identity share a step.
#include "kv/batch.h"

#include <algorithm>
#include <string>

namespace poot::kv {
namespace {

int32_t blocksFor(int64_t length) { return int32_t((length + kBlockSize - 1) / kBlockSize); }

// Full blocks two token lists share from their start.
int32_t sharedBlocks(std::span<const int32_t> a, std::span<const int32_t> b) {
  size_t n = std::min(a.size(), b.size()), i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return int32_t(i / kBlockSize);
}

}  // namespace

Batcher::Batcher(KvCache& cache, BatchConfig config) : cache_(cache), config_(std::move(config)) {}

int32_t Batcher::finalBlocks(int64_t request) const {
  const Record& r = records_[size_t(request)];
  return blocksFor(int64_t(r.promptLength) + r.request.maxNew - 1);
}

int32_t Batcher::reservedBlocks() const {
  int32_t reserved = 0;
  for (const auto& [seq, request] : live_)
    reserved += finalBlocks(request) - int32_t(cache_.sequence(seq)->blocks.size());
  return reserved;
}

void Batcher::notePeak() {
  stats_.peakBlocks = std::max(stats_.peakBlocks, cache_.pool().size() - cache_.pool().available());
}

int64_t Batcher::unfinished(uint64_t identity) const {
  auto it = unfinished_.find(identity);
  return it == unfinished_.end() ? 0 : it->second;
}

KvStatus checkRequest(const KvConfig& cache, const Request& q) {
  if (q.prompt.empty()) return KvError{KvErrorKind::EmptyPrompt, "a sequence starts with at least one token"};
  if (q.maxNew < 1)
    return KvError{KvErrorKind::BadRequest,
                   "a request generates at least one token, this one asks for " + std::to_string(q.maxNew)};
  int64_t length = int64_t(q.prompt.size()) + q.maxNew - 1;
  if (length > cache.capacity)
    return KvError{KvErrorKind::Capacity, "a prompt of " + std::to_string(q.prompt.size()) + " tokens and " +
                                              std::to_string(q.maxNew - 1) + " more to compute passes the capacity of " +
                                              std::to_string(cache.capacity)};
  if (blocksFor(length) > cache.numBlocks)
    return KvError{KvErrorKind::OutOfBlocks, "a prompt of " + std::to_string(q.prompt.size()) + " tokens needs " +
                                                 std::to_string(blocksFor(length)) + " kv blocks, the pool has " +
                                                 std::to_string(cache.numBlocks)};
  return KvOk{};
}

KvResult<int64_t> Batcher::submit(Request request) {
  if (auto c = checkRequest(cache_.config(), request); !c) return c.error();
  ++unfinished_[request.identity];
  int32_t length = int32_t(request.prompt.size());
  records_.push_back({std::move(request), length, 0, Finish::None});
  queue_.push_back(int64_t(records_.size()) - 1);
  return int64_t(records_.size()) - 1;
}

void Batcher::end(int64_t request, Finish why) {
  Record& r = records_[size_t(request)];
  r.finish = why;
  r.request.prompt = {};
  r.request.stop = {};
  ++finished_;
  if (--unfinished_[r.request.identity] == 0) unfinished_.erase(r.request.identity);
}

KvResult<bool> Batcher::cancel(int64_t request) {
  if (request < 0 || request >= requests())
    return KvError{KvErrorKind::UnknownRequest, "no request " + std::to_string(request) + " (" +
                                                    std::to_string(requests()) + " were submitted)"};
  if (finished(request)) return false;
  auto live = std::find_if(live_.begin(), live_.end(), [&](const auto& l) { return l.second == request; });
  if (live != live_.end()) {
    if (auto f = cache_.finish(live->first); !f) return f.error();
    live_.erase(live);
  } else {
    queue_.erase(std::find(queue_.begin(), queue_.end(), request));
  }
  end(request, Finish::Cancelled);
  return true;
}

KvStatus Batcher::admit() {
  while (!queue_.empty() && int32_t(live_.size()) < config_.decodeRows) {
    int64_t request = queue_.front();
    const Record& record = records_[size_t(request)];
    const std::vector<int32_t>& prompt = record.request.prompt;
    if (cache_.pool().available() - reservedBlocks() < finalBlocks(request)) return KvOk{};
    // A prefix another live sequence of its identity is still computing:
    // wait for its commit.
    if (cache_.config().prefixCache) {
      int32_t lookable = int32_t(prompt.size() - 1) / kBlockSize;
      for (const auto& [seq, other] : live_) {
        const Sequence* s = cache_.sequence(seq);
        if (s->identity != record.request.identity) continue;
        int32_t shared = std::min(lookable, sharedBlocks(prompt, s->tokens));
        if (shared > 0 && s->written < shared * kBlockSize) return KvOk{};
      }
    }
    auto started = cache_.startSequence(prompt, record.request.identity);
    if (!started) return started.error();
    records_[size_t(request)].request.prompt = {};  // the sequence holds it now
    queue_.pop_front();
    live_.emplace(started->seq, request);
    if (started->cachedTokens > 0) ++stats_.hits;
    stats_.skippedTokens += started->cachedTokens;
    notePeak();
  }
  return KvOk{};
}

KvResult<std::optional<PlannedStep>> Batcher::next() {
  if (auto a = admit(); !a) return a.error();
  if (live_.empty()) return std::optional<PlannedStep>{};
  const int32_t capacity = cache_.config().capacity;
  // The prefill candidates and every live sequence (each has a token to
  // compute), furthest behind first, then the previous step's identity.
  struct Candidate {
    int32_t written;
    bool otherIdentity;
    SeqId seq;
    auto operator<=>(const Candidate&) const = default;
  };
  std::vector<Candidate> prefill, decode;
  for (const auto& [seq, request] : live_) {
    const Sequence* s = cache_.sequence(seq);
    int32_t pending = int32_t(s->tokens.size()) - s->written;
    Candidate c{s->written, s->identity != lastIdentity_, seq};
    decode.push_back(c);
    if (pending > 1 && s->written <= capacity - config_.prefillTokens) prefill.push_back(c);
  }
  std::sort(prefill.begin(), prefill.end());
  std::sort(decode.begin(), decode.end());
  auto pending = [&](SeqId seq) {
    const Sequence* s = cache_.sequence(seq);
    return int32_t(s->tokens.size()) - s->written;
  };

  // A mixed step, where the first candidate's identity has both sampled
  // tokens and prompts to compute: every sampled token first (one place
  // and one row kept for a prompt), then prompt chunks, furthest behind
  // first, as long as rows and places are left.
  std::vector<SeqId> layout;
  std::vector<int32_t> counts;
  uint64_t identity = cache_.sequence(decode.front().seq)->identity;
  Plan plan = Plan::Decode;
  if (config_.mixedTokens > 0) {
    std::vector<SeqId> sampled, prompts;
    for (const Candidate& c : decode)
      if (cache_.sequence(c.seq)->identity == identity) (pending(c.seq) == 1 ? sampled : prompts).push_back(c.seq);
    if (!sampled.empty() && !prompts.empty()) {
      plan = Plan::Mixed;
      int32_t places = 0;
      for (SeqId seq : sampled) {
        if (int32_t(layout.size()) + 1 >= config_.mixedRows || places + 1 >= config_.mixedTokens) break;
        layout.push_back(seq);
        counts.push_back(1);
        ++places;
      }
      for (SeqId seq : prompts) {
        if (int32_t(layout.size()) == config_.mixedRows || places == config_.mixedTokens) break;
        layout.push_back(seq);
        counts.push_back(std::min(pending(seq), config_.mixedTokens - places));
        places += counts.back();
      }
      layout.resize(size_t(config_.mixedRows), kPadding);
      counts.resize(size_t(config_.mixedRows), 0);
    }
  }
  if (plan != Plan::Mixed) {
    plan = prefill.empty() ? Plan::Decode : Plan::Prefill;
    const auto& candidates = plan == Plan::Prefill ? prefill : decode;
    int32_t rows = plan == Plan::Prefill ? config_.prefillRows : config_.decodeRows;
    // The rows: the first candidate's identity, every position (each row
    // has its own).
    identity = cache_.sequence(candidates.front().seq)->identity;
    for (const Candidate& c : candidates)
      if (cache_.sequence(c.seq)->identity == identity && int32_t(layout.size()) < rows) layout.push_back(c.seq);
    layout.resize(size_t(rows), kPadding);
  }

  auto maps = plan == Plan::Mixed ? cache_.buildMixed(layout, counts, config_.mixedTokens)
                                  : cache_.buildStep(layout, plan == Plan::Prefill ? config_.prefillTokens : 1);
  if (!maps) return maps.error();
  PlannedStep step;
  step.plan = plan;
  step.identity = identity;
  step.maps = std::move(*maps);
  for (size_t r = 0; r < layout.size(); ++r) {
    SeqId seq = layout[r];
    step.requests.push_back(seq == kPadding ? -1 : live_.at(seq));
    bool last = seq != kPadding &&
                step.maps.pos[r] + step.maps.count[r] == int32_t(cache_.sequence(seq)->tokens.size());
    step.sampleAt.push_back(last ? step.maps.count[r] - 1 : -1);
  }
  return std::optional<PlannedStep>(std::move(step));
}

KvResult<std::vector<Finish>> Batcher::complete(const PlannedStep& step, std::span<const int32_t> sampled) {
  if (sampled.size() != step.sampleAt.size())
    return KvError{KvErrorKind::BadStep, "a step of " + std::to_string(step.sampleAt.size()) + " rows got " +
                                             std::to_string(sampled.size()) + " sampled tokens"};
  if (auto c = cache_.commit(step.maps); !c) return c.error();
  lastIdentity_ = step.identity;
  ++(step.plan == Plan::Prefill ? stats_.prefillSteps : step.plan == Plan::Decode ? stats_.decodeSteps : stats_.mixedSteps);
  if (step.plan == Plan::Decode)
    stats_.decodeRowsUsed += std::count_if(step.requests.begin(), step.requests.end(), [](int64_t q) { return q >= 0; });
  if (step.plan == Plan::Mixed)
    for (int32_t c : step.maps.count) stats_.mixedTokensUsed += c;
  std::vector<Finish> ended(step.sampleAt.size(), Finish::None);
  for (size_t r = 0; r < step.sampleAt.size(); ++r) {
    if (step.sampleAt[r] < 0) continue;
    SeqId seq = step.maps.seqs[r];
    int64_t request = step.requests[r];
    Record& record = records_[size_t(request)];
    int32_t token = sampled[r];
    ++record.generated;
    ++stats_.generated;
    if (record.request.stop.count(token) || record.generated >= record.request.maxNew) {
      if (auto f = cache_.finish(seq); !f) return f.error();
      live_.erase(seq);
      ended[r] = record.request.stop.count(token) ? Finish::Stop : Finish::Length;
      end(request, ended[r]);
      continue;
    }
    int32_t one[1] = {token};
    if (auto a = cache_.appendTokens(seq, one); !a) return a.error();
  }
  notePeak();
  return ended;
}

}  // namespace poot::kv
