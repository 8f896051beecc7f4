#include "core/serving/scheduler.hpp"

#include <algorithm>
#include <random>

namespace sy {

void Histogram::observe(double seconds) {
  size_t i = 0;
  while (i < bounds.size() && seconds > bounds[i]) ++i;
  ++buckets[i];
  sum += seconds;
  ++count;
}

struct Scheduler::Running {
  std::shared_ptr<Job> job;
  SeqId seq = 0;
  int64_t fed = 0;          // prompt tokens in the KV memory (reused or prefilled)
  int64_t next_token = -1;  // decoding: the sampled token to run next
  int64_t reserved = 0;     // blocks reserved for it
  Sampler sampler;
  StopRule stop;
  Job::Clock::time_point last_token{};
  Running(std::shared_ptr<Job> j, std::vector<int64_t> eos)
      : job(std::move(j)),
        sampler(job->sampling, job->prompt),
        stop(std::move(eos), job->sampling.stop) {}
  bool decoding() const { return fed == int64_t(job->prompt.size()) && next_token >= 0; }
};

Scheduler::Scheduler(Context& context, const Tokenizer& tokenizer,
                     const GenerationSettings& settings, SchedulerOptions options)
    : context_(context), tokenizer_(tokenizer), settings_(settings), options_(options) {
  metrics_.kv_blocks_total = context_.kv().total_blocks();
  logits_.resize(size_t(context_.vocab()));
}

Scheduler::~Scheduler() = default;

void Scheduler::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
}

int64_t Scheduler::blocks_for(const Job& job) const {
  const int64_t tokens = std::min<int64_t>(int64_t(job.prompt.size()) + job.sampling.max_tokens,
                                           context_.context_length());
  const int64_t bs = context_.kv().block_tokens();
  return (tokens + bs - 1) / bs;
}

Scheduler::Admit Scheduler::submit(std::shared_ptr<Job> job) {
  if (int64_t(job->prompt.size()) + job->sampling.max_tokens > context_.context_length() ||
      blocks_for(*job) > context_.kv().total_blocks() || job->prompt.empty())
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
  m.kv_blocks_reserved = reserved_;
  return m;
}

// FIFO: the head of the queue is admitted when a slot is free and its reservation fits; until
// then the ones behind it wait too (no overtaking, so a large request is never starved).
bool Scheduler::admit_locked() {
  bool any = false;
  while (!queue_.empty()) {
    std::shared_ptr<Job>& head = queue_.front();
    if (head->cancelled || Job::Clock::now() > head->deadline) {
      {
        std::lock_guard<std::mutex> jl(head->mu);
        head->done = true;
        head->finish_reason = "cancelled";
        head->finished = Job::Clock::now();
        head->cv.notify_all();
      }
      ++metrics_.cancelled;
      // After the job's lock is released: when the queue held the last reference, pop_front
      // destroys the job and its mutex (TSan found the unlock of a freed mutex here).
      queue_.pop_front();
      continue;
    }
    const int64_t need = blocks_for(*head);
    if (int64_t(running_.size()) >= options_.parallel ||
        reserved_ + need > context_.kv().total_blocks())
      break;
    std::vector<int64_t> eos =
        head->sampling.ignore_eos ? std::vector<int64_t>{} : settings_.eos_ids;
    auto r = std::make_unique<Running>(std::move(head), std::move(eos));
    queue_.pop_front();
    r->reserved = need;
    reserved_ += need;
    r->seq = context_.add_sequence();
    r->fed = context_.reuse_prefix(r->seq, r->job->prompt);
    r->job->cached_tokens = r->fed;
    metrics_.prompt_tokens += r->job->prompt.size();
    metrics_.cached_prompt_tokens += uint64_t(r->fed);
    running_.push_back(std::move(r));
    any = true;
  }
  running_count_ = int64_t(running_.size());
  return any;
}

void Scheduler::run() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      for (auto& r : running_)
        if (r->job->cancelled || Job::Clock::now() > r->job->deadline) finish(*r, "cancelled");
      running_.erase(std::remove_if(running_.begin(), running_.end(),
                                    [](const auto& r) { return r == nullptr || r->job->done; }),
                     running_.end());
      admit_locked();
      metrics_.kv_blocks_used = context_.kv().used_blocks();
      if (stopping_) {
        for (auto& r : running_) finish(*r, "cancelled");
        running_.clear();
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
    step();
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& job : queue_) {
    std::lock_guard<std::mutex> jl(job->mu);
    job->done = true;
    job->finish_reason = "cancelled";
    job->cv.notify_all();
    ++metrics_.cancelled;
  }
  queue_.clear();
  running_count_ = 0;
  idle_.notify_all();
}

// One step: a decode token of every running sequence, then prompt chunks in arrival order.
void Scheduler::step() {
  Batch batch;
  std::vector<Running*> rows;  // whose logits each asked-for row of the step is
  for (auto& r : running_)
    if (r->decoding()) {
      batch.add(r->next_token, context_.sequence_length(r->seq), r->seq, true);
      rows.push_back(r.get());
    }
  int64_t budget = context_.bounds().max_batch_tokens - int64_t(batch.size());
  std::vector<std::pair<Running*, int64_t>> chunks;
  for (auto& r : running_) {
    const int64_t left = int64_t(r->job->prompt.size()) - r->fed;
    if (left == 0 || budget == 0) continue;
    const int64_t take = std::min(left, budget);
    for (int64_t i = 0; i < take; ++i)
      batch.add(r->job->prompt[size_t(r->fed + i)], r->fed + i, r->seq, i + 1 == left);
    if (take == left) rows.push_back(r.get());
    chunks.emplace_back(r.get(), take);
    budget -= take;
  }
  if (batch.size() == 0) return;
  StepResult result = context_.decode(batch);
  if (!result.ran) {  // reservations make this rare (a context past its length): fail those
    std::lock_guard<std::mutex> lock(mu_);
    for (const StepRefusal& refusal : result.refused)
      for (auto& r : running_)
        if (r->seq == refusal.seq) finish(*r, "error", refusal.error);
    return;
  }
  for (auto& [r, take] : chunks) r->fed += take;
  std::vector<float>& logits = logits_;
  std::lock_guard<std::mutex> lock(mu_);
  ++metrics_.steps;
  for (size_t i = 0; i < rows.size(); ++i) {
    Running& r = *rows[i];
    const float* row = context_.logits(i);
    std::copy(row, row + logits.size(), logits.begin());
    const int64_t id = r.sampler.sample(logits);
    std::string emit;
    const StopRule::Reason why = r.stop.feed(id, tokenizer_.decode_token(id), emit);
    const auto now = Job::Clock::now();
    {
      std::lock_guard<std::mutex> jl(r.job->mu);
      r.job->pending += emit;
      r.job->generated.push_back(id);
      if (r.job->completion_tokens++ == 0) {
        r.job->first_token = now;
        metrics_.ttft.observe(std::chrono::duration<double>(now - r.job->submitted).count());
      } else {
        metrics_.itl.observe(std::chrono::duration<double>(now - r.last_token).count());
      }
    }
    r.last_token = now;
    ++metrics_.generated_tokens;
    if (why == StopRule::Reason::eos) {
      std::lock_guard<std::mutex> jl(r.job->mu);
      r.job->pending += r.stop.flush();  // text held back for a stop text that never came
    }
    if (why != StopRule::Reason::none)
      finish(r, "stop");
    else if (r.job->completion_tokens >= r.job->sampling.max_tokens ||
             context_.sequence_length(r.seq) + 1 >= context_.context_length())
      finish(r, "length");
    else
      r.next_token = id;
    r.job->cv.notify_all();
  }
}

// Called with mu_ held.
void Scheduler::finish(Running& r, const std::string& reason, std::optional<Error> error) {
  if (r.job->done) return;
  context_.remove_sequence(r.seq);  // its full blocks stay a reusable prefix
  reserved_ -= r.reserved;
  r.reserved = 0;
  // The gauge drops with the job's end, not at the loop's next sweep: a client that reads
  // /metrics right after its last token must not see its own sequence still running.
  --running_count_;
  std::lock_guard<std::mutex> jl(r.job->mu);
  if (reason != "stop") r.job->pending += r.stop.flush();
  r.job->done = true;
  r.job->finish_reason = reason;
  r.job->error = std::move(error);
  r.job->finished = Job::Clock::now();
  ++(reason == "cancelled" ? metrics_.cancelled
     : reason == "error"   ? metrics_.failed
                           : metrics_.finished);
  r.job->cv.notify_all();
}

}  // namespace sy
