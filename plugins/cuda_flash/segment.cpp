#include "segment.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "device_queue.hpp"
#include "fused_kernels_params.hpp"
#include "fused_ops.hpp"

namespace sy::cuda {
namespace {

using sy::edge::StatusError;

size_t align256(size_t n) {
  return (n + 255) / 256 * 256;
}

int64_t elements_of(const DLTensor* t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// FNV-1a of the table's data pointers: a graph replays the addresses it captured.
uint64_t address_digest(const DLTensor* const* tensors, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= reinterpret_cast<uintptr_t>(tensors[i]->data) + tensors[i]->byte_offset;
    h *= 1099511628211ull;
  }
  return h;
}

// SWITCHYARD_CUDA_GRAPHS=off (or 0) runs every step eagerly: how a benchmark counts the
// launches a step takes without graphs. Read when a segment is prepared.
bool graphs_enabled() {
  const char* v = std::getenv("SWITCHYARD_CUDA_GRAPHS");
  return !v || (std::strcmp(v, "off") != 0 && std::strcmp(v, "0") != 0);
}

}  // namespace

// The CUDA runtime behind GraphCache: capture on the queue's stream, this thread only.
class CudaSegment::Graphs final : public GraphApi {
 public:
  explicit Graphs(cudaStream_t stream) : stream_(stream) {}
  void begin_capture() override {
    check_cuda(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
               "cudaStreamBeginCapture");
  }
  uintptr_t end_capture() override {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    cudaError_t e = cudaStreamEndCapture(stream_, &graph);
    if (e == cudaSuccess) e = cudaGraphInstantiate(&exec, graph, 0);
    if (graph) cudaGraphDestroy(graph);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return reinterpret_cast<uintptr_t>(exec);
  }
  void abort_capture() override {
    cudaGraph_t graph = nullptr;
    cudaStreamEndCapture(stream_, &graph);
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
  }
  void launch(uintptr_t handle) override {
    check_cuda(cudaGraphLaunch(reinterpret_cast<cudaGraphExec_t>(handle), stream_),
               "cudaGraphLaunch");
  }
  void destroy(uintptr_t handle) override {
    cudaGraphExecDestroy(reinterpret_cast<cudaGraphExec_t>(handle));
  }

 private:
  cudaStream_t stream_;
};

CudaSegment::CudaSegment(sy::edge::SegmentSpec<CudaKernel>&& spec, DeviceQueue& queue)
    : spec_(std::move(spec)), queue_(queue) {
  std::vector<FusionEntry> entries;
  for (const auto& e : spec_.entries) entries.push_back({e.op.get(), e.inputs, e.outputs});
  work_ = plan_work(entries);
  size_t bytes = 0;
  for (size_t i = 0; i < spec_.entries.size(); ++i) {
    const auto& e = spec_.entries[i];
    if (e.kind != SY_SEGMENT_ENTRY_UPLOAD) continue;
    const auto& from = spec_.tensors[e.inputs[0]];
    const auto& to = spec_.tensors[e.outputs[0]];
    if (from.memory != SY_MEMORY_HOST || to.memory != SY_MEMORY_DEVICE || from.dtype != to.dtype ||
        from.shape != to.shape)
      throw StatusError(SY_STATUS_UNSUPPORTED,
                        "an upload must go from host to device memory, same dtype and bounds");
    uploads_.push_back({i, bytes});
    bytes += align256(sy_tensor_bytes(from.dtype, int32_t(from.shape.size()), from.shape.data()));
  }
  use_device(queue_.ordinal());
  if (bytes) check_cuda(cudaHostAlloc(&staging_, bytes, cudaHostAllocDefault), "cudaHostAlloc");
  check_cuda(cudaEventCreateWithFlags(&staged_, cudaEventDisableTiming), "cudaEventCreate");
  graph_api_ = std::make_unique<Graphs>(queue_.stream());
  const bool graphs = graphs_enabled();
  graphs_ = std::make_unique<GraphCache>(*graph_api_, graphs);
  form_ = std::string("own stream, no read-backs; ") +
          (graphs ? "a CUDA graph per decode bucket (one query per sequence, up to " +
                        std::to_string(GraphCache::kMaxTokens) + " tokens)"
                  : "CUDA graphs off (SWITCHYARD_CUDA_GRAPHS)") +
          "; " + std::to_string(spec_.entries.size()) + " entries in " +
          std::to_string(work_.size()) + " launches: " + describe_work(work_);
  std::set<std::string> kernel_forms;  // once each, in a stable order
  for (const auto& e : spec_.entries)
    if (e.impl && !e.impl->form().empty()) kernel_forms.insert(e.impl->form());
  for (const auto& f : kernel_forms) form_ += "; " + f;
}

CudaSegment::~CudaSegment() {
  std::lock_guard<std::mutex> lock(queue_.mutex());
  if (cudaSetDevice(queue_.ordinal()) == cudaSuccess) cudaStreamSynchronize(queue_.stream());
  graphs_.reset();
  if (staged_) cudaEventDestroy(staged_);
  if (staging_) cudaFreeHost(staging_);
  cudaGetLastError();  // never fails; nothing to report to
}

void CudaSegment::check_tensors(const DLTensor* const* tensors, size_t n) const {
  if (n != spec_.tensors.size())
    throw StatusError(SY_STATUS_INVALID_ARGUMENT, std::to_string(n) + " tensors for a segment of " +
                                                      std::to_string(spec_.tensors.size()));
  for (size_t i = 0; i < n; ++i) {
    const DLTensor* t = tensors[i];
    const auto& d = spec_.tensors[i];
    if (!t || !t->data || t->ndim != int(d.shape.size()))
      throw StatusError(SY_STATUS_INVALID_ARGUMENT,
                        "segment tensor " + std::to_string(i) + " is NULL or of the wrong rank");
    for (int k = 0; k < t->ndim; ++k)
      if (t->shape[k] < 0 || t->shape[k] > d.shape[size_t(k)] ||
          (!(d.dynamic_dims >> k & 1u) && t->shape[k] != d.shape[size_t(k)]))
        throw StatusError(SY_STATUS_INVALID_ARGUMENT,
                          "segment tensor " + std::to_string(i) + " dimension " +
                              std::to_string(k) + " is " + std::to_string(t->shape[k]) +
                              ", prepared for " + std::to_string(d.shape[size_t(k)]));
  }
}

void CudaSegment::stage_uploads(const DLTensor* const* tensors) {
  if (uploads_.empty()) return;
  // The last step's copies out of the staging must be done before it is rewritten. The host
  // waits for every step, so this is normally done; if not, it is a wait and is counted.
  if (staged_pending_ && cudaEventQuery(staged_) == cudaErrorNotReady) {
    count_blocking_wait();
    check_cuda(cudaEventSynchronize(staged_), "cudaEventSynchronize");
  }
  cudaGetLastError();
  for (const Upload& u : uploads_) {
    const DLTensor* from = tensors[spec_.entries[u.entry].inputs[0]];
    const size_t bytes = sy_tensor_bytes(spec_.tensors[spec_.entries[u.entry].inputs[0]].dtype,
                                         from->ndim, from->shape);
    std::memcpy(static_cast<char*>(staging_) + u.offset,
                static_cast<const char*>(from->data) + from->byte_offset, bytes);
  }
}

void CudaSegment::run(const DLTensor* const* tensors, size_t num_tensors, const sy_step_info& step,
                      sy::edge::SegmentCounters& counters) {
  check_tensors(tensors, num_tensors);
  std::lock_guard<std::mutex> lock(queue_.mutex());
  use_device(queue_.ordinal());
  const WorkCounts before = thread_work();
  stage_uploads(tensors);
  const bool replayed =
      graphs_->run(step, address_digest(tensors, num_tensors), [&] { enqueue(tensors, step); });
  check_cuda(cudaEventRecord(staged_, queue_.stream()), "cudaEventRecord");
  staged_pending_ = true;
  const WorkCounts& after = thread_work();
  counters.blocking_waits = uint32_t(after.blocking_waits - before.blocking_waits);
  counters.launches = replayed ? 1 : uint32_t(after.launches - before.launches);
  counters.graph_launches = replayed ? 1 : 0;
}

void CudaSegment::enqueue(const DLTensor* const* tensors, const sy_step_info& step) {
  for (const WorkItem& w : work_) enqueue_item(w, tensors, step);
}

void CudaSegment::enqueue_item(const WorkItem& w, const DLTensor* const* tensors,
                               const sy_step_info& step) {
  switch (w.kind) {
    case WorkKind::add_rms_norm: enqueue_add_rms_norm(w, tensors); return;
    case WorkKind::rope_append: enqueue_rope_append(w, tensors); return;
    case WorkKind::gemv:
      if (enqueue_gemv(w, tensors)) return;
      break;  // too many rows, or misaligned: the entries' own kernels
    default: break;
  }
  for (size_t e : w.entries) enqueue_entry(e, tensors, step);
}

void CudaSegment::enqueue_entry(size_t e, const DLTensor* const* tensors,
                                const sy_step_info& step) {
  const auto& entry = spec_.entries[e];
  if (entry.kind == SY_SEGMENT_ENTRY_UPLOAD) {
    auto it = std::find_if(uploads_.begin(), uploads_.end(),
                           [&](const Upload& u) { return u.entry == e; });
    const DLTensor* to = tensors[entry.outputs[0]];
    const size_t bytes =
        sy_tensor_bytes(spec_.tensors[entry.outputs[0]].dtype, to->ndim, to->shape);
    check_cuda(cudaMemcpyAsync(static_cast<char*>(to->data) + to->byte_offset,
                               static_cast<char*>(staging_) + it->offset, bytes,
                               cudaMemcpyHostToDevice, queue_.stream()),
               "cudaMemcpyAsync(upload)");
    check_launch("cudaMemcpyAsync(upload)");
    return;
  }
  in_.clear();
  out_.clear();
  for (uint32_t i : entry.inputs) in_.push_back(tensors[i]);
  for (uint32_t i : entry.outputs) out_.push_back(tensors[i]);
  entry.impl->launch(in_.data(), out_.data(), &step);
}

void CudaSegment::enqueue_add_rms_norm(const WorkItem& w, const DLTensor* const* tensors) {
  const auto& add = spec_.entries[w.entries[0]];
  const auto& norm = spec_.entries[w.entries[1]];
  const DLTensor* x = tensors[norm.inputs[0]];
  const int64_t hidden = x->ndim ? x->shape[x->ndim - 1] : 1;
  auto ptr = [&](uint32_t i) {
    return static_cast<char*>(tensors[i]->data) + tensors[i]->byte_offset;
  };
  launch_add_rms_norm(norm.op->inputs[0].dtype, ptr(add.inputs[0]), ptr(add.inputs[1]),
                      ptr(add.outputs[0]), ptr(norm.inputs[1]), ptr(norm.outputs[0]),
                      hidden ? elements_of(x) / hidden : 0, hidden,
                      float(norm.op->float_attr(SY_ATTR_EPS, 1e-6)),
                      float(norm.op->float_attr(SY_ATTR_WEIGHT_OFFSET, 0.0)), queue_.stream());
}

void CudaSegment::enqueue_rope_append(const WorkItem& w, const DLTensor* const* tensors) {
  auto ptr = [&](uint32_t i) {
    return static_cast<char*>(tensors[i]->data) + tensors[i]->byte_offset;
  };
  fused::RopeAppendParams p{};
  const sy::edge::OpCopy* rope = nullptr;
  sy_dtype dtype = SY_DTYPE_BF16;
  for (size_t e : w.entries) {
    const auto& en = spec_.entries[e];
    dtype = en.op->inputs[0].dtype;
    const DLTensor* x = tensors[en.inputs[0]];
    p.tokens = x->shape[0] * x->shape[1];
    p.d = int(x->shape[3]);
    if (en.op->op == SY_OP_ROPE) {
      rope = en.op.get();
      p.pos = ptr(en.inputs[1]);
      p.pos64 = en.op->inputs[1].dtype == SY_DTYPE_I64;
      p.jobs[p.num_jobs++] = {ptr(en.inputs[0]), ptr(en.outputs[0]), nullptr, int(x->shape[2]), 1};
      continue;
    }
    p.slots = reinterpret_cast<const int64_t*>(ptr(en.inputs[1]));
    bool chained = false;  // the append of a rope's output: that rope's job also scatters
    for (int j = 0; j < p.num_jobs; ++j)
      if (p.jobs[j].y == ptr(en.inputs[0]) && p.jobs[j].rope) {
        p.jobs[j].pool = ptr(en.outputs[0]);
        chained = true;
      }
    if (!chained)
      p.jobs[p.num_jobs++] = {ptr(en.inputs[0]), nullptr, ptr(en.outputs[0]), int(x->shape[2]), 0};
  }
  p.rot = rope ? int(rope->int_attr(SY_ATTR_ROTARY_DIM, p.d)) : p.d;
  p.neox = !rope || rope->string_attr(SY_ATTR_ROPE_STYLE, "neox") == "neox";
  p.theta = rope ? rope->float_attr(SY_ATTR_ROPE_THETA, 10000.0) : 10000.0;
  p.factor = rope ? rope->float_attr(SY_ATTR_ROPE_ATTENTION_FACTOR, 1.0) : 1.0;
  p.table = nullptr;
  launch_rope_append(dtype, p, queue_.stream());
}

// False when the step has more rows than the kernel takes or an operand is not 16-byte
// aligned: the caller then runs the entries' own kernels.
bool CudaSegment::enqueue_gemv(const WorkItem& w, const DLTensor* const* tensors) {
  auto ptr = [&](uint32_t i) {
    return static_cast<char*>(tensors[i]->data) + tensors[i]->byte_offset;
  };
  const size_t matmuls = w.gated ? 2 : w.entries.size();
  const auto& first = spec_.entries[w.entries[0]];
  fused::GemvParams p{};
  p.k = int(first.op->inputs[1].shape[1]);
  const DLTensor* a = tensors[first.inputs[0]];
  const int64_t m = elements_of(a) / p.k;
  if (m > fused::kMaxGemvRows || !aligned16(ptr(first.inputs[0]))) return false;
  p.a = ptr(first.inputs[0]);
  p.m = int(m);
  for (size_t j = 0; j < matmuls; ++j) {
    const size_t at = w.gated ? (j == 0 ? w.gate : w.up) : j;
    const auto& e = spec_.entries[w.entries[at]];
    if (!aligned16(ptr(e.inputs[1]))) return false;
    p.w[j] = ptr(e.inputs[1]);
    p.c[j] = ptr(e.outputs[0]);
    p.n[j] = int(e.op->inputs[1].shape[0]);
  }
  p.num_jobs = int(matmuls);
  if (w.gated) {
    const auto& act = spec_.entries[w.entries[2]];
    const std::string approx = act.op->string_attr(SY_ATTR_GELU_APPROX, "none");
    p.gate = act.op->op == SY_OP_SILU_MUL ? fused::Gate::kSilu
             : approx == "tanh"           ? fused::Gate::kGeluTanh
                                          : fused::Gate::kGeluErf;
    p.g = ptr(act.outputs[0]);
  }
  launch_gemv(first.op->inputs[0].dtype, p, queue_.stream());
  return true;
}

}  // namespace sy::cuda
