#include "core/serving/scheduler.hpp"

#include <algorithm>
#include <random>

namespace sy {
namespace {
// Text for the client: through the job's reasoning split and its tool-call reader when it has
// them. `last`: the stream ended, so nothing is held back any more. Called with the job's lock
// held.
void publish_text_locked(Job& job, int64_t id, const std::string& text, bool last) {
  ReasoningSplit::Parts parts;
  if (job.reasoning) {
    if (!text.empty() || !last) job.reasoning->feed(id, text, parts);
    if (last) job.reasoning->finish(parts);
  } else {
    parts.content = text;
  }
  job.pending_reasoning += parts.reasoning;
  if (!job.tools) {
    job.pending += parts.content;
    for (const auto& [name, arguments] : parts.calls) job.pending += arguments;  // not dropped
    return;
  }
  for (const auto& [name, arguments] : parts.calls) job.tools->add(name, arguments, job.tool_calls);
  job.tools->feed(parts.content, job.pending, job.tool_calls);
  if (last) job.tools->finish(job.pending, job.tool_calls);
}
}  // namespace

void Histogram::observe(double seconds) {
  size_t i = 0;
  while (i < bounds.size() && seconds > bounds[i]) ++i;
  ++buckets[i];
  sum += seconds;
  ++count;
}

// A running job: its sequence and the sink its stream writes to. on_token runs on the
// scheduler thread during the engine's step and takes only the job's own lock.
class Scheduler::Running final : public OutputSink {
 public:
  Running(Scheduler& owner, std::shared_ptr<Job> j) : job(std::move(j)), owner_(owner) {}
  bool on_token(int64_t id, const std::string& text, const TokenLogprobs* logprobs) override {
    const auto now = Job::Clock::now();
    {
      std::lock_guard<std::mutex> jl(job->mu);
      publish_text_locked(*job, id, text, false);
      job->generated.push_back(id);
      if (logprobs) job->logprobs.push_back(*logprobs);
      if (job->completion_tokens++ == 0) {
        job->first_token = now;
        owner_.ttft_.push_back(std::chrono::duration<double>(now - job->submitted).count());
      } else {
        owner_.itl_.push_back(std::chrono::duration<double>(now - last_token_).count());
      }
    }
    last_token_ = now;
    job->cv.notify_all();
    return true;
  }
  void on_finish(FinishReason reason, const std::string& tail, const Error* error) override {
    owner_.ended_.push_back(
        {this, reason, tail, error ? std::optional<Error>(*error) : std::nullopt});
  }
  // A fork of the leader's sequence: its own promise, taken out of the leader's, so each
  // choice's blocks stay promised until that choice ends.
  void on_fork(SeqId s) override {
    seq = s;
    const int64_t blocks = owner_.fork_blocks(*job);
    owner_.context_.promise_blocks(s, blocks);
    leader->promised -= blocks;
    owner_.context_.promise_blocks(leader->seq, leader->promised);
  }

  std::shared_ptr<Job> job;
  SeqId seq = -1;             // -1: a fork not made yet
  Running* leader = nullptr;  // a fork's: the choice whose sequence it forks
  int64_t promised = 0;       // the leader's: blocks promised to its sequence

 private:
  Scheduler& owner_;
  Job::Clock::time_point last_token_{};
};

Scheduler::Scheduler(Context& context, const Tokenizer& tokenizer,
                     const GenerationSettings& settings, SchedulerOptions options)
    : context_(context), options_(options), engine_(context, tokenizer, settings) {
  metrics_.kv_blocks_total = context_.kv().total_blocks();
  metrics_.kv_block_tokens = context_.kv().block_tokens();
}

Scheduler::~Scheduler() = default;

void Scheduler::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
}

int64_t Scheduler::fork_blocks(const Job& job) const {
  const int64_t bs = context_.kv().block_tokens();
  return (job.sampling.max_tokens + bs - 1) / bs + 1;
}

int64_t Scheduler::blocks_for(const Job& job) const {
  const int64_t tokens = std::min<int64_t>(int64_t(job.prompt.size()) + job.sampling.max_tokens,
                                           context_.context_length());
  const int64_t bs = context_.kv().block_tokens();
  return (tokens + bs - 1) / bs + int64_t(job.forks.size()) * fork_blocks(job);
}

Scheduler::Admit Scheduler::submit(std::shared_ptr<Job> job) {
  if (int64_t(job->prompt.size()) + job->sampling.max_tokens > context_.context_length() ||
      blocks_for(*job) > context_.kv().total_blocks() || job->prompt.empty() ||
      int64_t(job->forks.size()) + 1 > options_.parallel)
    return Admit::too_large;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (draining_ || stopping_) return Admit::draining;
    // --max-queue counts the requests that wait: those beyond the free slots.
    const int64_t free_slots = std::max<int64_t>(0, options_.parallel - running_count_);
    if (int64_t(queue_.size()) >= options_.max_queue + free_slots) return Admit::queue_full;
    job->submitted = Job::Clock::now();
    queue_.push_back(std::move(job));
  }
  wake_.notify_all();
  return Admit::queued;
}

void Scheduler::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  draining_ = true;
  wake_.notify_all();
  idle_.wait(lock, [&] { return queue_.empty() && running_count_ == 0; });
}

int64_t Scheduler::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return int64_t(queue_.size());
}

SchedulerMetrics Scheduler::metrics() const {
  std::lock_guard<std::mutex> lock(mu_);
  SchedulerMetrics m = metrics_;
  m.queued = int64_t(queue_.size());
  m.running = running_count_;
  return m;
}

// The KV ledger's figures, for metrics(): read here, on the scheduler thread, which alone
// touches the Context.
void Scheduler::publish_kv_locked() {
  metrics_.kv_blocks_used = context_.kv().used_blocks();
  metrics_.kv_blocks_reserved = context_.kv().promised_blocks();
}

// A queued job that never ran (cancelled, expired, or the scheduler stopped), with its forks.
// They share one lock and signal.
void Scheduler::end_queued_locked(Job& job) {
  {
    std::lock_guard<std::mutex> jl(job.mu);
    auto end = [](Job& one) {
      one.done = true;
      one.finish_reason = FinishReason::cancelled;
      one.finished = Job::Clock::now();
    };
    end(job);
    for (auto& f : job.forks) end(*f);
    job.cv.notify_all();
  }
  metrics_.cancelled += 1 + job.forks.size();
}

// FIFO: the head of the queue is admitted when a slot is free and its promise fits; until
// then the ones behind it wait too (no overtaking, so a large request is never starved).
bool Scheduler::admit_locked() {
  bool any = false;
  while (!queue_.empty()) {
    std::shared_ptr<Job>& head = queue_.front();
    if (head->cancelled || Job::Clock::now() > head->deadline) {
      end_queued_locked(*head);
      // After the job's lock is released: when the queue held the last reference, pop_front
      // destroys the job and its mutex (TSan found the unlock of a freed mutex here).
      queue_.pop_front();
      continue;
    }
    const int64_t need = blocks_for(*head);
    const int64_t choices = int64_t(head->forks.size()) + 1;
    if (int64_t(running_.size()) + choices > options_.parallel ||
        context_.kv().promised_blocks() + need > context_.kv().total_blocks())
      break;
    auto r = std::make_unique<Running>(*this, std::move(head));
    queue_.pop_front();
    r->seq = context_.add_sequence();
    r->promised = need;
    context_.promise_blocks(r->seq, need);
    const int64_t cached = context_.reuse_prefix(r->seq, r->job->prompt);
    {
      // The HTTP thread reads it (usage) under the job's lock, while the job runs.
      std::lock_guard<std::mutex> jl(r->job->mu);
      r->job->cached_tokens = cached;
      for (auto& f : r->job->forks) f->cached_tokens = cached;
    }
    metrics_.prompt_tokens += r->job->prompt.size();
    metrics_.cached_prompt_tokens += uint64_t(cached);
    std::vector<OutputSink*> sinks{r.get()};
    std::vector<std::unique_ptr<Running>> forks;
    for (auto& f : r->job->forks) {
      forks.push_back(std::make_unique<Running>(*this, f));
      forks.back()->leader = r.get();
      sinks.push_back(forks.back().get());
    }
    engine_.start(r->seq,
                  std::vector<int64_t>(r->job->prompt.begin() + cached, r->job->prompt.end()),
                  r->job->sampling, std::span<OutputSink* const>(sinks),
                  std::span<const int64_t>(r->job->prompt.data(), size_t(cached)));
    running_.push_back(std::move(r));
    for (auto& f : forks) running_.push_back(std::move(f));
    any = true;
  }
  running_count_ = int64_t(running_.size());
  return any;
}

// Jobs whose client went away or whose deadline passed end before the next step. Their flags
// are atomics and deadlines fixed before submit: no lock is needed to read them.
void Scheduler::cancel_expired() {
  const auto now = Job::Clock::now();
  for (auto& r : running_)
    if (r->seq >= 0 && (r->job->cancelled || now > r->job->deadline))
      engine_.cancel(r->seq, FinishReason::cancelled);
}

void Scheduler::run() {
  for (;;) {
    cancel_expired();
    {
      std::unique_lock<std::mutex> lock(mu_);
      publish_step();
      admit_locked();
      publish_kv_locked();
      if (stopping_) {
        for (auto& r : running_)
          if (r->seq >= 0) engine_.cancel(r->seq, FinishReason::cancelled);
        publish_step();
        running_count_ = 0;
        idle_.notify_all();
        break;
      }
      if (running_.empty()) {
        idle_.notify_all();
        wake_.wait_for(lock, std::chrono::milliseconds(100));
        continue;
      }
    }
    // The step and its sampling run without the lock: submit() and metrics() never wait on it.
    if (engine_.step()) ++steps_;
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& job : queue_) end_queued_locked(*job);
  queue_.clear();
  running_count_ = 0;
  idle_.notify_all();
}

// What the last step (and cancel_expired) gathered: latencies into the histograms, ended
// streams finished and their jobs dropped. Called with mu_ held.
void Scheduler::publish_step() {
  for (double s : ttft_) metrics_.ttft.observe(s);
  for (double s : itl_) metrics_.itl.observe(s);
  metrics_.generated_tokens += ttft_.size() + itl_.size();
  metrics_.steps += steps_;
  steps_ = 0;
  ttft_.clear();
  itl_.clear();
  for (Ended& e : ended_) finish_locked(*e.running, e.reason, e.tail, std::move(e.error));
  ended_.clear();
  running_.erase(
      std::remove_if(running_.begin(), running_.end(), [](const auto& r) { return r->job->done; }),
      running_.end());
}

// Called with mu_ held, on the scheduler thread.
void Scheduler::finish_locked(Running& r, FinishReason reason, const std::string& tail,
                              std::optional<Error> error) {
  if (r.job->done) return;
  if (r.seq >= 0) context_.remove_sequence(r.seq);  // full blocks stay a prefix; promise ends
  // The gauge drops with the job's end, not at the loop's next sweep: a client that reads
  // /metrics right after its last token must not see its own sequence still running.
  --running_count_;
  {
    std::lock_guard<std::mutex> jl(r.job->mu);
    publish_text_locked(*r.job, -1, tail, true);
    r.job->done = true;
    r.job->finish_reason = reason;
    r.job->error = std::move(error);
    r.job->finished = Job::Clock::now();
  }
  ++(reason == FinishReason::cancelled ? metrics_.cancelled
     : reason == FinishReason::error   ? metrics_.failed
                                       : metrics_.finished);
  r.job->cv.notify_all();
}

}  // namespace sy
