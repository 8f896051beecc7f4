// An owned copy of an sy_op_desc, for kernels that outlive the prepare call, with the
// attribute look-ups every kernel needs.
#pragma once

#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "cxx_edge/cxx_edge.hpp"
#include "switchyard/op_contract.h"
#include "switchyard/tensor_check.h"

namespace sy::edge {

struct TensorCopy {
  sy_dtype dtype = SY_DTYPE_F32;
  std::vector<int64_t> shape;  // upper bounds for the dims in dynamic_dims
  sy_memory_kind memory = SY_MEMORY_HOST;
  uint32_t dynamic_dims = 0;  // since ABI 1.5: dims whose extent each execute carries
  uint32_t layout = 0;        // since ABI 1.10: 0 as stored, else a packed layout of this plugin
  sy_tensor_desc desc{};      // points into `shape`; rebuilt by OpCopy

  int64_t elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

struct OpCopy {
  sy_op_kind op = SY_OP_COPY;
  std::vector<TensorCopy> inputs, outputs;
  std::map<std::string, sy_attr> attrs;  // string values live in `strings_`
  uint64_t features = 0;

  explicit OpCopy(const sy_op_desc& d) : op(d.op), features(d.required_features) {
    auto copy = [](const sy_tensor_desc* t) {
      TensorCopy c;
      if (!t) return c;
      c.dtype = t->dtype;
      if (t->shape && t->ndim > 0) c.shape.assign(t->shape, t->shape + t->ndim);
      c.memory = t->memory;
      c.dynamic_dims = sy_tensor_dynamic_dims(t);
      c.layout = sy_tensor_layout(t);
      return c;
    };
    for (size_t i = 0; i < d.num_inputs; ++i) inputs.push_back(copy(d.inputs[i]));
    for (size_t i = 0; i < d.num_outputs; ++i) outputs.push_back(copy(d.outputs[i]));
    for (auto* list : {&inputs, &outputs})
      for (auto& t : *list) {
        t.desc.struct_size = sizeof(t.desc);
        t.desc.dtype = t.dtype;
        t.desc.ndim = static_cast<int32_t>(t.shape.size());
        t.desc.shape = t.shape.data();
        t.desc.memory = t.memory;
#if SY_ABI_COMPAT_MINOR >= 5
        t.desc.dynamic_dims = t.dynamic_dims;
#endif
#if SY_ABI_COMPAT_MINOR >= 10
        t.desc.layout = t.layout;
#endif
      }
    for (size_t i = 0; i < d.num_attrs; ++i) {
      const sy_attr* a = d.attrs[i];
      if (!a || !a->name) continue;
      sy_attr c = *a;
      if (a->type == SY_ATTR_STRING) {
        strings_.push_back(a->s ? a->s : "");
      }
      attrs[a->name] = c;
    }
    // Point string attributes at our own storage, in insertion order of strings_.
    size_t k = 0;
    for (size_t i = 0; i < d.num_attrs; ++i) {
      const sy_attr* a = d.attrs[i];
      if (a && a->name && a->type == SY_ATTR_STRING) attrs[a->name].s = strings_[k++].c_str();
    }
  }
  OpCopy(const OpCopy&) = delete;
  OpCopy& operator=(const OpCopy&) = delete;

  bool has(sy_feature f) const {
    return (features & SY_FEATURE_BIT(f)) != 0;
  }
  // Whether some extent varies per execute (ABI 1.5 dynamic dims).
  bool dynamic() const {
    for (const auto* list : {&inputs, &outputs})
      for (const auto& t : *list)
        if (t.dynamic_dims) return true;
    return false;
  }
  int64_t int_attr(const char* name, int64_t fallback) const {
    auto it = attrs.find(name);
    return it != attrs.end() && it->second.type == SY_ATTR_INT ? it->second.i : fallback;
  }
  double float_attr(const char* name, double fallback) const {
    auto it = attrs.find(name);
    if (it == attrs.end()) return fallback;
    if (it->second.type == SY_ATTR_FLOAT) return it->second.f;
    if (it->second.type == SY_ATTR_INT) return static_cast<double>(it->second.i);
    return fallback;
  }
  std::string string_attr(const char* name, const std::string& fallback) const {
    auto it = attrs.find(name);
    return it != attrs.end() && it->second.type == SY_ATTR_STRING && it->second.s ? it->second.s
                                                                                  : fallback;
  }

 private:
  std::vector<std::string> strings_;
};

// The sy_op_desc view of an OpCopy (pointing into it), for filters that take the C form.
class OpView {
 public:
  explicit OpView(const OpCopy& op) {
    for (const auto& t : op.inputs) inputs_.push_back(&t.desc);
    for (const auto& t : op.outputs) outputs_.push_back(&t.desc);
    for (const auto& [name, a] : op.attrs) {
      attrs_.push_back(a);
      attrs_.back().name = name.c_str();  // the copy's own name, not the caller's
    }
    for (const auto& a : attrs_) attr_ptrs_.push_back(&a);
    desc_.struct_size = sizeof(desc_);
    desc_.op = op.op;
    desc_.inputs = inputs_.data();
    desc_.num_inputs = inputs_.size();
    desc_.outputs = outputs_.data();
    desc_.num_outputs = outputs_.size();
    desc_.attrs = attr_ptrs_.data();
    desc_.num_attrs = attr_ptrs_.size();
    desc_.required_features = op.features;
  }
  OpView(const OpView&) = delete;
  OpView& operator=(const OpView&) = delete;
  const sy_op_desc* get() const { return &desc_; }

 private:
  std::vector<const sy_tensor_desc*> inputs_, outputs_;
  std::vector<sy_attr> attrs_;
  std::vector<const sy_attr*> attr_ptrs_;
  sy_op_desc desc_{};
};

// Runs the operator contract on a prepared operator: a factory's guard, so no kernel is ever
// built for an operator its contract refuses. Throws StatusError(INVALID_ARGUMENT) naming every
// refusal.
inline void enforce_contract(const OpCopy& op, const char* kernel) {
  std::string text;
  auto collect = [](void* ctx, const sy_refusal* r) {
    auto* t = static_cast<std::string*>(ctx);
    *t += std::string(t->empty() ? "" : "; ") + (r->text ? r->text : r->constraint);
  };
  OpView view(op);
  if (sy_op_contract_check(view.get(), collect, &text) > 0)
    throw StatusError(SY_STATUS_INVALID_ARGUMENT, std::string(kernel) + " refuses: " + text);
}

// The prepared operator with the actual shapes of one execute's tensors (ABI 1.5 dynamic
// dims), for the operator contract: separately valid extents must also agree with each other.
// Built once per prepared kernel; each execute only points its shapes at the tensors'.
class ActualOpView {
 public:
  explicit ActualOpView(const OpCopy& op) : view_(op) {
    const sy_op_desc* d = view_.get();
    for (size_t i = 0; i < d->num_inputs + d->num_outputs; ++i)
      descs_.push_back(*(i < d->num_inputs ? d->inputs[i] : d->outputs[i - d->num_inputs]));
    for (size_t i = 0; i < descs_.size(); ++i)
      (i < d->num_inputs ? inputs_ : outputs_).push_back(&descs_[i]);
    desc_ = *d;
    desc_.inputs = inputs_.data();
    desc_.outputs = outputs_.data();
  }
  ActualOpView(const ActualOpView&) = delete;
  ActualOpView& operator=(const ActualOpView&) = delete;
  // The operator at `args`' shapes (its tensors already checked one by one). Allocates nothing.
  const sy_op_desc* at(const sy_execute_args& args) {
    for (size_t i = 0; i < descs_.size(); ++i) {
      const bool in = i < desc_.num_inputs;
      descs_[i].shape = (in ? args.inputs : args.outputs)[in ? i : i - desc_.num_inputs]->shape;
    }
    return &desc_;
  }

 private:
  OpView view_;
  std::vector<sy_tensor_desc> descs_;
  std::vector<const sy_tensor_desc*> inputs_, outputs_;
  sy_op_desc desc_{};
};

// Validates `execute`'s tensors against the operator a kernel was prepared for: the host does
// too, but any caller of the ABI must get INVALID_ARGUMENT rather than a crash. With dynamic
// dims (`actual`: the prepared kernel's view) the actual shapes must also satisfy the operator
// contract together.
inline sy_status validate_execute_args(const OpCopy& op, const sy_execute_args& args,
                                       sy_error_buffer* err, ActualOpView* actual = nullptr) {
  if (args.num_inputs != op.inputs.size() || args.num_outputs != op.outputs.size())
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT,
                   "%zu inputs and %zu outputs, prepared for %zu and %zu", args.num_inputs,
                   args.num_outputs, op.inputs.size(), op.outputs.size());
  char label[32], msg[256];
  for (size_t i = 0; i < args.num_inputs + args.num_outputs; ++i) {
    bool in = i < args.num_inputs;
    size_t k = in ? i : i - args.num_inputs;
    const DLTensor* const* list = in ? args.inputs : args.outputs;
    const sy_tensor_desc* desc = in ? &op.inputs[k].desc : &op.outputs[k].desc;
    if (sy_tensor_matches(list ? list[k] : nullptr, desc, "", msg, sizeof msg)) continue;
    // Labelled only on a mismatch: every execute passes here.
    std::snprintf(label, sizeof label, "%s %zu", in ? "input" : "output", k);
    sy_tensor_matches(list ? list[k] : nullptr, desc, label, msg, sizeof msg);
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "%s", msg);
  }
  if (!actual) return SY_STATUS_OK;
  std::string text;
  auto collect = [](void* ctx, const sy_refusal* r) {
    auto* t = static_cast<std::string*>(ctx);
    *t += std::string(t->empty() ? "" : "; ") + (r->text ? r->text : r->constraint);
  };
  if (sy_op_contract_check(actual->at(args), collect, &text) > 0)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "the actual extents disagree: %s",
                   text.c_str());
  return SY_STATUS_OK;
}

}  // namespace sy::edge
