#include "core/plugin/capability_probe.hpp"

#include <algorithm>

#include "core/capability/vocabulary.hpp"
#include "core/plugin/plugin.hpp"

namespace sy {
namespace {

// The device the probes are asked about: the plugin's first device of the kernel's
// type, or a described one when the plugin has none (e.g. no GPU here).
DeviceInfo probe_device(const Plugin& plugin, const Envelope& env) {
  for (const auto& d : plugin.devices())
    if (d.type == env.device_type && d.available) return d;
  DeviceInfo d;
  d.name = "probe";
  d.type = env.device_type;
  d.memory_is_host = env.device_type == kDLCPU;
  return d;
}

sy_dtype first_dtype(uint64_t mask) {
  for (int i = 0; i < SY_DTYPE_COUNT; ++i)
    if (mask & SY_DTYPE_BIT(i)) return static_cast<sy_dtype>(i);
  return SY_DTYPE_F32;
}

int64_t probe_head_dim(const Envelope& env) {
  if (!env.head_dims.empty()) return env.head_dims.front();
  int64_t d = env.head_dim_multiple > 0
                  ? env.head_dim_multiple * std::max<int64_t>(1, 64 / env.head_dim_multiple)
                  : 64;
  return env.head_dim_max > 0 ? std::min<int64_t>(d, env.head_dim_max) : d;
}

// An operator the envelope admits apart from what a probe then changes.
OpDesc base_op(const Envelope& env, const DeviceInfo& device) {
  sy_memory_kind mem = device.memory_is_host ? SY_MEMORY_HOST : SY_MEMORY_DEVICE;
  OpDesc op;
  op.op = env.op;
  sy_dtype dt = first_dtype(env.dtypes);
  if (env.op == SY_OP_ATTENTION || env.op == SY_OP_FUSED_DECODE_ATTENTION) {
    int64_t d = probe_head_dim(env);
    op.inputs = {{dt, {1, 16, 4, d}, mem}, {dt, {1, 16, 4, d}, mem}, {dt, {1, 16, 4, d}, mem}};
    op.outputs = {{dt, {1, 16, 4, d}, mem}};
  } else {
    op.inputs = {{dt, {4, 64}, mem}, {dt, {4, 64}, mem}};
    op.outputs = {{dt, {4, 64}, mem}};
  }
  return op;
}

std::vector<std::pair<std::string, OpDesc>> probes(const Envelope& env, const DeviceInfo& dev) {
  std::vector<std::pair<std::string, OpDesc>> out;
  OpDesc base = base_op(env, dev);
  for (int i = 0; i < SY_DTYPE_COUNT; ++i) {
    if (env.dtypes & SY_DTYPE_BIT(i)) continue;
    OpDesc op = base;
    for (auto& t : op.inputs) t.dtype = static_cast<sy_dtype>(i);
    out.emplace_back(std::string("dtype ") + sy_dtype_name(static_cast<sy_dtype>(i)), op);
    break;  // one excluded dtype is enough to catch a check that ignores dtypes
  }
  if (env.op != SY_OP_ATTENTION) return out;
  auto lacks = [&](sy_feature f) { return !(env.features & SY_FEATURE_BIT(f)); };
  if (lacks(SY_FEATURE_SINKS)) {
    OpDesc op = base;
    op.inputs.push_back({SY_DTYPE_F32, {base.inputs[0].shape[2]}, base.inputs[0].memory});
    out.emplace_back("feature sinks", op);
  }
  if (lacks(SY_FEATURE_LSE)) {
    OpDesc op = base;
    op.outputs.push_back({SY_DTYPE_F32, {1, 4, 16}, base.outputs[0].memory});
    out.emplace_back("feature lse", op);
  }
  if (lacks(SY_FEATURE_SLIDING_WINDOW)) {
    OpDesc op = base;
    op.set(SY_ATTR_WINDOW_LEFT, int64_t{8});
    out.emplace_back("feature sliding_window", op);
  }
  if (lacks(SY_FEATURE_SOFTCAP)) {
    OpDesc op = base;
    op.set(SY_ATTR_SOFTCAP, 30.0);
    out.emplace_back("feature softcap", op);
  }
  if (!env.accepts_head_dim(24)) {
    OpDesc op = base;
    for (auto& t : op.inputs) t.shape[3] = 24;
    op.outputs[0].shape[3] = 24;
    out.emplace_back("head_dim 24", op);
  }
  return out;
}

}  // namespace

std::optional<std::string> find_capability_lie(const Plugin& plugin) {
  for (size_t k = 0; k < plugin.kernels().size(); ++k) {
    const Envelope& env = plugin.kernels()[k];
    DeviceInfo device = probe_device(plugin, env);
    for (const auto& [what, op] : probes(env, device)) {
      if (envelope_refusals(env, op, device).empty()) continue;  // probe not outside after all
      CheckResult r = plugin.check(k, device, op);
      if (r.accepted)
        return "kernel '" + env.kernel + "' check() accepts an operator outside its envelope (" +
               what + ", envelope offers dtypes [" + join(dtype_names(env.dtypes)) +
               "], features [" + join(feature_names(env.features)) + "])";
    }
  }
  return std::nullopt;
}

}  // namespace sy
