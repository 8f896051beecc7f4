// The fusion pass of segment_fusion.hpp. A decoder's graph interleaves what one launch could
// do (q_proj, q_rope, k_proj, k_rope, k_append, v_proj, v_append), so a group is formed from
// its first entry by hoisting later entries to it, each only when the dataflow allows: nothing
// between reads what it writes, writes what it reads, or writes what it writes.
#include "segment_fusion.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace sy::cuda {
namespace {

constexpr size_t kWindow = 16;  // how far ahead a group looks for members
constexpr size_t kMaxRopeJobs = 4, kMaxGemvJobs = 3;

using sy::edge::OpCopy;

bool is_op(const FusionEntry& e, sy_op_kind k) {
  return e.op && e.op->op == k;
}

bool shares(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  for (uint32_t x : a)
    if (std::find(b.begin(), b.end(), x) != b.end()) return true;
  return false;
}

// Whether entry j may run at the place of the first entry of `group` (its lowest index): no
// entry left between them, outside the group and not yet placed, conflicts with it.
bool hoistable(const std::vector<FusionEntry>& es, const std::vector<bool>& placed,
               const std::vector<size_t>& group, size_t j) {
  const FusionEntry& e = es[j];
  for (size_t k = group.front() + 1; k < j; ++k) {
    if (placed[k] || std::find(group.begin(), group.end(), k) != group.end()) continue;
    if (shares(es[k].outputs, e.inputs) || shares(es[k].inputs, e.outputs) ||
        shares(es[k].outputs, e.outputs))
      return false;
  }
  return true;
}

bool float16(sy_dtype d) {
  return d == SY_DTYPE_BF16 || d == SY_DTYPE_F16;
}

// ---- gemv ---------------------------------------------------------------------------------

bool gemv_matmul(const FusionEntry& e) {
  if (!is_op(e, SY_OP_MATMUL) || e.inputs.size() != 2 || e.outputs.size() != 1) return false;
  const OpCopy& op = *e.op;
  const auto& b = op.inputs[1];
  return op.int_attr(SY_ATTR_TRANSPOSE_B, 0) == 1 && float16(op.inputs[0].dtype) &&
         b.dtype == op.inputs[0].dtype && op.outputs[0].dtype == op.inputs[0].dtype &&
         b.shape.size() == 2 && b.shape[1] % 8 == 0 && b.shape[0] < (int64_t(1) << 30) &&
         !op.inputs[0].shape.empty() && op.inputs[0].shape.back() == b.shape[1];
}

bool same_k(const FusionEntry& a, const FusionEntry& b) {
  return a.op->inputs[1].shape[1] == b.op->inputs[1].shape[1] &&
         a.op->inputs[0].dtype == b.op->inputs[0].dtype;
}

WorkItem gemv_group(const std::vector<FusionEntry>& es, const std::vector<bool>& placed, size_t i) {
  WorkItem w{WorkKind::gemv, {i}};
  for (size_t j = i + 1; j < es.size() && j < i + kWindow; ++j) {
    if (placed[j] || w.entries.size() == kMaxGemvJobs) continue;
    if (gemv_matmul(es[j]) && es[j].inputs[0] == es[i].inputs[0] && same_k(es[i], es[j]) &&
        hoistable(es, placed, w.entries, j))
      w.entries.push_back(j);
  }
  if (w.entries.size() != 2) return w;
  // gate, up -> act(gate) * up: the product joins when it reads exactly the two outputs.
  const uint32_t o0 = es[w.entries[0]].outputs[0], o1 = es[w.entries[1]].outputs[0];
  for (size_t j = w.entries[1] + 1; j < es.size() && j < i + kWindow; ++j) {
    if (placed[j]) continue;
    const FusionEntry& e = es[j];
    const bool act = is_op(e, SY_OP_SILU_MUL) || is_op(e, SY_OP_GELU_MUL);
    if (!act || e.inputs.size() != 2 || e.op->inputs[0].shape != e.op->inputs[1].shape) continue;
    const bool fwd = e.inputs[0] == o0 && e.inputs[1] == o1;
    const bool rev = e.inputs[0] == o1 && e.inputs[1] == o0;
    if ((fwd || rev) && e.op->inputs[0].dtype == es[i].op->inputs[0].dtype &&
        hoistable(es, placed, w.entries, j)) {
      w.gated = true;
      w.gate = fwd ? 0 : 1;
      w.up = fwd ? 1 : 0;
      w.entries.push_back(j);
    }
    break;  // only the first product after the pair is considered
  }
  return w;
}

// ---- rope_append ----------------------------------------------------------------------------

bool plain_rope(const FusionEntry& e) {
  return is_op(e, SY_OP_ROPE) && e.inputs.size() == 2 && e.outputs.size() == 1 &&
         e.op->inputs[0].shape.size() == 4;
}
bool paged_append(const FusionEntry& e) {
  return is_op(e, SY_OP_KV_CACHE_APPEND) && e.op->int_attr(SY_ATTR_PAGED, 0) == 1 &&
         e.inputs.size() == 2 && e.outputs.size() == 1;
}

// Two ropes rotate alike: same positions tensor, head dim, rotary dim, style, theta, factor.
bool same_rope(const FusionEntry& a, const FusionEntry& b) {
  const OpCopy &x = *a.op, &y = *b.op;
  return a.inputs[1] == b.inputs[1] && x.inputs[0].dtype == y.inputs[0].dtype &&
         x.inputs[0].shape[3] == y.inputs[0].shape[3] &&
         x.int_attr(SY_ATTR_ROTARY_DIM, x.inputs[0].shape[3]) ==
             y.int_attr(SY_ATTR_ROTARY_DIM, y.inputs[0].shape[3]) &&
         x.string_attr(SY_ATTR_ROPE_STYLE, "neox") == y.string_attr(SY_ATTR_ROPE_STYLE, "neox") &&
         x.float_attr(SY_ATTR_ROPE_THETA, 10000.0) == y.float_attr(SY_ATTR_ROPE_THETA, 10000.0) &&
         x.float_attr(SY_ATTR_ROPE_ATTENTION_FACTOR, 1.0) ==
             y.float_attr(SY_ATTR_ROPE_ATTENTION_FACTOR, 1.0);
}

// Whether entry j joins the rope/append group `w` (whose first member is a rope or an append).
bool joins_rope_group(const std::vector<FusionEntry>& es, const WorkItem& w, size_t j) {
  const FusionEntry& e = es[j];
  const FusionEntry* rope = nullptr;
  const FusionEntry* append = nullptr;
  for (size_t m : w.entries) (plain_rope(es[m]) ? rope : append) = &es[m];
  if (plain_rope(e)) return !rope || same_rope(*rope, e);
  if (!paged_append(e)) return false;
  if (append && append->inputs[1] != e.inputs[1]) return false;  // one slot mapping
  // Rows [1, T, H, D] of the group's dtype and head dim.
  const auto& rows = e.op->inputs[0];
  const FusionEntry& first = es[w.entries.front()];
  const auto& ref = first.op->inputs[0];
  return rows.shape.size() == 4 && rows.dtype == ref.dtype && rows.shape.back() == ref.shape.back();
}

// Jobs of a rope/append group: a rope whose output an append of the group scatters is one job.
size_t rope_jobs(const std::vector<FusionEntry>& es, const std::vector<size_t>& members) {
  size_t jobs = members.size();
  for (size_t a : members)
    if (paged_append(es[a]))
      for (size_t r : members)
        if (plain_rope(es[r]) && es[r].outputs[0] == es[a].inputs[0]) --jobs;
  return jobs;
}

WorkItem rope_group(const std::vector<FusionEntry>& es, const std::vector<bool>& placed, size_t i) {
  WorkItem w{WorkKind::rope_append, {i}};
  for (size_t j = i + 1; j < es.size() && j < i + kWindow; ++j) {
    if (placed[j] || !joins_rope_group(es, w, j) || !hoistable(es, placed, w.entries, j)) continue;
    // An append of an output must come after the rope that writes it; a member may read no
    // other member's output except that way.
    std::vector<size_t> with = w.entries;
    with.push_back(j);
    if (rope_jobs(es, with) > kMaxRopeJobs) break;
    bool clean = true;
    for (size_t m : w.entries) {
      const bool chain =
          plain_rope(es[m]) && paged_append(es[j]) && es[m].outputs[0] == es[j].inputs[0];
      if (!chain && (shares(es[m].outputs, es[j].inputs) || shares(es[j].outputs, es[m].inputs) ||
                     shares(es[m].outputs, es[j].outputs)))
        clean = false;
    }
    if (clean) w.entries.push_back(j);
  }
  return w;
}

// ---- add + rms_norm -------------------------------------------------------------------------

bool add_then_norm(const FusionEntry& add, const FusionEntry& norm) {
  if (!is_op(add, SY_OP_ADD) || !is_op(norm, SY_OP_RMS_NORM)) return false;
  const OpCopy &a = *add.op, &n = *norm.op;
  return add.inputs.size() == 2 && add.outputs.size() == 1 && norm.inputs.size() == 2 &&
         norm.outputs.size() == 1 && norm.inputs[0] == add.outputs[0] &&
         a.inputs[0].shape == a.inputs[1].shape && a.inputs[0].dtype == a.inputs[1].dtype &&
         n.inputs[0].dtype == a.inputs[0].dtype && n.inputs[1].dtype == n.inputs[0].dtype &&
         !n.inputs[0].shape.empty() && n.inputs[1].shape.size() == 1 &&
         n.inputs[1].shape[0] == n.inputs[0].shape.back() && norm.outputs[0] != add.inputs[0] &&
         norm.outputs[0] != add.inputs[1];
}

}  // namespace

const char* work_kind_name(WorkKind k) {
  switch (k) {
    case WorkKind::upload: return "upload";
    case WorkKind::add_rms_norm: return "add_rms_norm";
    case WorkKind::rope_append: return "rope_append";
    case WorkKind::gemv: return "gemv";
    default: return "kernel";
  }
}

std::vector<WorkItem> plan_work(const std::vector<FusionEntry>& es) {
  std::vector<WorkItem> out;
  std::vector<bool> placed(es.size(), false);
  for (size_t i = 0; i < es.size(); ++i) {
    if (placed[i]) continue;
    WorkItem w{es[i].op ? WorkKind::kernel : WorkKind::upload, {i}};
    if (gemv_matmul(es[i])) {
      w = gemv_group(es, placed, i);
    } else if (plain_rope(es[i]) || paged_append(es[i])) {
      WorkItem r = rope_group(es, placed, i);
      if (r.entries.size() > 1) w = r;
    } else if (i + 1 < es.size() && !placed[i + 1] && add_then_norm(es[i], es[i + 1])) {
      w = WorkItem{WorkKind::add_rms_norm, {i, i + 1}};
    }
    for (size_t e : w.entries) placed[e] = true;
    out.push_back(std::move(w));
  }
  return out;
}

std::string describe_work(const std::vector<WorkItem>& work) {
  std::map<std::string, size_t> n;
  for (const auto& w : work) ++n[work_kind_name(w.kind)];
  std::string out;
  for (const char* k : {"add_rms_norm", "rope_append", "gemv", "kernel", "upload"})
    if (n[k]) out += (out.empty() ? "" : ", ") + std::to_string(n[k]) + " " + k;
  return out;
}

}  // namespace sy::cuda
