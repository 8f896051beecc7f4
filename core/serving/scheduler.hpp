// Continuous batching over one Context (docs/serve.md): a scheduler thread runs the engine's
// steps (core/engine/: the loop `run` and the host API use too); requests join at step
// boundaries, FIFO.
//
//   - Admission promises the KV blocks a request can need: its prompt plus max_tokens, as
//     whole blocks, in the KV memory's own ledger (KvBlocks::promise). A request is admitted
//     only while the promises of the running ones and its own fit the pool, so a running stream
//     never runs out of KV memory because another one arrived; the request at the head of the queue
//     waits (no preemption, no recompute). A request that could not fit even alone is refused at
//     submit (SY308).
//   - Every step holds one decode token of each running sequence, then prefill chunks of the
//     admitted prompts in arrival order up to the plan's max_batch_tokens: a long prompt is
//     prefilled over several steps while the decoders keep streaming.
//   - A prompt's prefix still in the pool (a shared system prompt, the earlier turns of a
//     conversation: a finished sequence's full blocks) is reused, not recomputed.
//   - A cancelled job (its client went away, or its deadline passed) is dropped at the next
//     step boundary; its blocks stay a reusable prefix until the pool needs them.
//
// Threads: run() is the scheduler loop, on the caller's thread; the Context and the engine are
// its alone, and it samples without holding the lock submit() and metrics() take. Call it on the
// thread that prepared the Context's kernels: libgomp keeps one OpenMP team per thread that opens
// parallel regions, and with more team threads than cores its workers stop spinning between
// regions, so every region of every step pays a futex wake (measured: 3.5x slower decode).
// submit(), drain(), stop() and metrics() come from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/generation/reasoning.hpp"
#include "core/generation/tool_calls.hpp"
#include "core/runtime/runtime.hpp"

namespace sy {

// The lock and signal of a request's jobs: one per request, shared by its choices (n > 1), so
// the thread that streams them waits on one condition for all.
struct JobSignal {
  std::mutex mu;
  std::condition_variable cv;
};

// One request's generation (one choice of it), shared by the HTTP thread that waits on it and
// the scheduler.
struct Job {
  using Clock = std::chrono::steady_clock;
  Job() : Job(std::make_shared<JobSignal>()) {}
  explicit Job(std::shared_ptr<JobSignal> shared)
      : signal(std::move(shared)), mu(signal->mu), cv(signal->cv) {}
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;
  // ---- set before submit ----------------------------------------------------------------
  std::vector<int64_t> prompt;
  SamplingOptions sampling;  // max_tokens resolved (>= 1)
  // A chat of a model whose template marks reasoning: the split of its text (used by the
  // scheduler thread only); null: all text is `pending`.
  std::unique_ptr<ReasoningSplit> reasoning;
  // A chat with tools: its content read for tool calls (after the reasoning split), by the
  // scheduler thread only; null: the content is text only.
  std::unique_ptr<ToolCallReader> tools;
  Clock::time_point deadline = Clock::time_point::max();
  // n > 1: the request's other choices, each a Job made with this one's signal and the same
  // prompt, sampling and deadline (their own reasoning split and tool reader). Submitted with
  // this one, they run as forks of its sequence once the prompt has run (Engine::start with
  // several sinks); choice i samples with seed + i. Empty for n = 1.
  std::vector<std::shared_ptr<Job>> forks;
  // ---- set by the client side: stop at the next step boundary ---------------------------
  std::atomic<bool> cancelled{false};
  // ---- written by the scheduler under `mu`, signalled on `cv` ----------------------------
  std::shared_ptr<JobSignal> signal;
  std::mutex& mu;               // signal's
  std::condition_variable& cv;  // signal's
  std::string pending;          // text not yet taken by the client (stop texts and UTF-8 held back)
  std::string pending_reasoning;        // the same, of the reasoning (when `reasoning` is set)
  std::vector<ToolCall> tool_calls;     // every call read so far (when `tools` is set)
  std::vector<int64_t> generated;       // every sampled id, in order
  std::vector<TokenLogprobs> logprobs;  // when sampling.logprobs >= 0: per shown token, in order
  int64_t completion_tokens = 0, cached_tokens = 0;
  bool done = false;
  FinishReason finish_reason = FinishReason::cancelled;  // once done
  std::optional<Error> error;                            // finish_reason error
  Clock::time_point submitted{}, first_token{}, finished{};
};

struct SchedulerOptions {
  int64_t parallel = 8;    // sequences running at once (the plan's max_sequences)
  int64_t max_queue = 64;  // requests waiting beyond those
};

// Counters and histograms for /metrics (Prometheus): cumulative since start.
struct Histogram {
  std::vector<double> bounds;     // upper bounds, seconds, increasing
  std::vector<uint64_t> buckets;  // per bound (not cumulative), then +Inf
  double sum = 0;
  uint64_t count = 0;
  explicit Histogram(std::vector<double> b) : bounds(std::move(b)), buckets(bounds.size() + 1) {}
  void observe(double seconds);
};

struct SchedulerMetrics {
  int64_t queued = 0, running = 0;
  int64_t kv_blocks_used = 0, kv_blocks_total = 0, kv_blocks_reserved = 0;
  int64_t kv_block_tokens = 0;  // tokens a block holds (what prefix-aware routers hash by)
  uint64_t prompt_tokens = 0, cached_prompt_tokens = 0, generated_tokens = 0, steps = 0;
  uint64_t finished = 0, cancelled = 0, failed = 0;
  Histogram ttft{{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}};
  Histogram itl{{0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1}};
};

class Scheduler {
 public:
  Scheduler(Context& context, const Tokenizer& tokenizer, const GenerationSettings& settings,
            SchedulerOptions options);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  enum class Admit { queued, queue_full, draining, too_large };
  // Queues `job` (and its forks). too_large: its prompt and max_tokens (for every choice) could
  // not fit the pool (or the context) even alone, or it has more choices than --parallel;
  // queue_full: --max-queue requests already wait; draining: drain() was called.
  Admit submit(std::shared_ptr<Job> job);
  // The scheduler loop; returns after stop(), with what was left cancelled.
  void run();
  // Stops taking jobs and returns when every queued and running one has finished.
  void drain();
  void stop();  // makes run() return
  SchedulerMetrics metrics() const;
  int64_t queued() const;

 private:
  class Running;
  struct Ended {
    Running* running;
    FinishReason reason;
    std::string tail;
    std::optional<Error> error;
  };
  bool admit_locked();
  void cancel_expired();
  void publish_step();
  void finish_locked(Running& r, FinishReason reason, const std::string& tail,
                     std::optional<Error> error);
  void publish_kv_locked();
  void end_queued_locked(Job& job);
  int64_t blocks_for(const Job& job) const;   // its choices' promise, all together
  int64_t fork_blocks(const Job& job) const;  // one fork's: its tokens and a copied block

  Context& context_;
  SchedulerOptions options_;
  Engine engine_;  // the scheduler thread's, as is context_
  mutable std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::vector<std::unique_ptr<Running>> running_;  // the scheduler thread's
  int64_t running_count_ = 0;                      // running jobs not yet finished, for others
  bool draining_ = false, stopping_ = false;
  SchedulerMetrics metrics_;
  // What a step produced, gathered by the sinks without the lock, published under it after.
  std::vector<Ended> ended_;
  std::vector<double> ttft_, itl_;
  uint64_t steps_ = 0;
};

}  // namespace sy
