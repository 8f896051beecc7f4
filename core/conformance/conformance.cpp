// The conformance run in this process (run_conformance): per kernel, its grid (op_grid.hpp),
// check / prepare / execute against the reference plugin, bad arguments, two threads.
#include "core/conformance/conformance.hpp"

#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <thread>

#include "core/conformance/case_buffers.hpp"
#include "core/conformance/op_grid.hpp"
#include "core/conformance/run.hpp"
#include "core/plugin/kernel.hpp"
#include "core/plugin/loader.hpp"
#include "switchyard/envelope_check.h"

namespace sy {
namespace {

using conformance::Buffers;
using conformance::GridCase;

using conformance::Hooks;

class Run {
 public:
  Run(const Plugin& plugin, const Plugin* reference, const ConformanceOptions& o, const Hooks& h,
      ConformanceReport& report)
      : plugin_(plugin), reference_(reference), opts_(o), hooks_(h), report_(report) {}

  void kernel(size_t index) {
    const Envelope& env = plugin_.kernels()[index];
    ConformanceKernel k{env.kernel, sy_op_kind_name(env.op)};
    if (hooks_.progress) hooks_.progress(env.kernel + ": struct sizes");
    struct_sizes(index);
    bool extras_done = false;
    for (const GridCase& c : conformance::op_grid(env, opts_.quick)) {
      c.inside ? ++k.inside : ++k.outside;
      if (hooks_.progress) hooks_.progress(env.kernel + ": " + c.label);
      run_case(index, c, k, extras_done);
      watch_output(env.kernel, c.label);
    }
    report_.kernels.push_back(k);
  }

 private:
  void fail(const std::string& verdict, const std::string& kernel, const std::string& label,
            const std::string& detail) {
    report_.failures.push_back({verdict, kernel, label, detail});
  }

  void watch_output(const std::string& kernel, const std::string& label) {
    if (!hooks_.new_output) return;
    const std::string bytes = hooks_.new_output();
    if (!bytes.empty())
      fail("wrote_output", kernel, label,
           "the plugin wrote " + std::to_string(bytes.size()) + " bytes to stdout/stderr: \"" +
               bytes.substr(0, 80) + "\"");
  }

  // The device kernels run on: the first live one of the envelope's type.
  std::optional<uint32_t> device_for(const Envelope& env) const {
    for (uint32_t i = 0; i < plugin_.devices().size(); ++i)
      if (plugin_.devices()[i].type == env.device_type && plugin_.devices()[i].available) return i;
    return std::nullopt;
  }

  void run_case(size_t index, const GridCase& c, ConformanceKernel& k, bool& extras_done);
  void struct_sizes(size_t index);
  enum class Outcome { compared, no_reference, failed };
  Outcome compare_with_reference(size_t index, const GridCase& c, PreparedKernel& kernel);
  void bad_arguments(const std::string& kernel, const GridCase& c, PreparedKernel& prepared);
  void two_threads(size_t index, uint32_t device, const GridCase& c);
  // Returns 1 when the case ran on a packed weight too.
  int packed_layouts(size_t index, uint32_t device, const DeviceInfo& dev, const GridCase& c,
                     PreparedKernel& stored);

  const Plugin& plugin_;
  const Plugin* reference_;
  const ConformanceOptions& opts_;
  const Hooks& hooks_;
  ConformanceReport& report_;
  uint32_t seed_ = 0;
};

void Run::run_case(size_t index, const GridCase& c, ConformanceKernel& k, bool& extras_done) {
  const Envelope& env = plugin_.kernels()[index];
  const std::optional<uint32_t> device = device_for(env);
  DeviceInfo described;
  described.type = env.device_type;
  described.name = "described";
  described.arch = env.device_type == kDLCUDA ? "sm_90" : "generic";
  const DeviceInfo& dev = device ? plugin_.devices()[*device] : described;
  const CheckResult check = plugin_.check(index, dev, c.op);
  if (check.error) return fail("check_failed", env.kernel, c.label, check.error->what());
  if (!c.inside && check.accepted)
    fail("accepts_outside", env.kernel, c.label, "check accepted an operator outside the envelope");
  if (c.inside && !check.accepted) {
    ++k.narrowed;
    return;
  }
  if (!device) return;  // nothing to prepare on here (cuda_flash without a GPU)
  auto prepared = prepare_kernel(plugin_, index, *device, c.op);
  if (check.accepted != bool(prepared)) {
    fail("prepare_disagrees", env.kernel, c.label,
         check.accepted ? "check accepted, prepare failed: " + prepared.error().message
                        : std::string("check refused, prepare succeeded"));
    return;
  }
  if (!prepared || !c.inside || !dev.memory_is_host) return;
  const Outcome outcome = compare_with_reference(index, c, **prepared);
  if (outcome != Outcome::compared) return;
  ++k.executed;
  k.packed += packed_layouts(index, *device, dev, c, **prepared);
  if (!extras_done) {
    extras_done = true;
    bad_arguments(env.kernel, c, **prepared);
    two_threads(index, *device, c);
  }
}

// Runs the case on the plugin and on the reference from the same inputs. A case the reference
// cannot run (it declares every op and dtype, so only a shape it refuses) is not counted as run.
Run::Outcome Run::compare_with_reference(size_t index, const GridCase& c, PreparedKernel& kernel) {
  const std::string& name = plugin_.kernels()[index].kernel;
  std::optional<size_t> ref_index;
  for (size_t i = 0; reference_ && i < reference_->kernels().size(); ++i)
    if (reference_->kernels()[i].op == c.op.op) ref_index = i;
  if (!ref_index) return Outcome::no_reference;
  auto ref = prepare_kernel(*reference_, *ref_index, 0, c.op);
  if (!ref) return Outcome::no_reference;
  Buffers got(c.op, opts_.seed + ++seed_, c.actual_inputs, c.actual_outputs), want = got;
  // A kernel that quantizes its activations is held to the reference on those values.
  if (auto n = declared_numerics(plugin_.kernels()[index].features))
    want.quantize_input(0, n->levels);
  if (auto e = kernel.execute(got.inputs(), got.outputs())) {
    fail("execute_failed", name, c.label, e->what());
    return Outcome::failed;
  }
  if (auto e = (*ref)->execute(want.inputs(), want.outputs())) return Outcome::no_reference;
  if (std::string diff = got.differs_from(want); !diff.empty()) {
    fail("wrong_numbers", name, c.label, diff);
    return Outcome::failed;
  }
  return Outcome::compared;
}

// check and prepare called with an argument struct smaller than any ABI minor's must return an
// error (INVALID_ARGUMENT), not read past it or crash.
void Run::struct_sizes(size_t index) {
  const std::string& name = plugin_.kernels()[index].kernel;
  const sy_plugin_api& api = plugin_.api();
  ErrorText err;
  auto refuses_undersized = [&](auto args, auto slot, const char* slot_name, const char* type) {
    args.struct_size = sizeof(size_t);
    args.plugin = plugin_.instance();
    args.kernel_index = uint32_t(index);
    if (slot && slot(&args, err.buffer()) == SY_STATUS_OK)
      fail("struct_size", name, slot_name,
           std::string(slot_name) + " accepted a " + type + " of " +
               std::to_string(args.struct_size) + " bytes");
  };
  refuses_undersized(sy_check_args{}, api.check, "check", "sy_check_args");
  refuses_undersized(sy_prepare_args{}, api.prepare, "prepare", "sy_prepare_args");
}

// A NULL data pointer, a wrong rank, non-compact strides and a position past a cache's capacity
// must be errors, not crashes or silent successes — from the plugin itself: the host's own
// validation is bypassed, since any host may call the plugin.
void Run::bad_arguments(const std::string& name, const GridCase& c, PreparedKernel& prepared) {
  Buffers b(c.op, 7, c.actual_inputs, c.actual_outputs);
  auto accepted = [&](const std::vector<DLTensor>& in) {
    std::vector<const DLTensor*> ins;
    for (const DLTensor& t : in) ins.push_back(&t);
    return !prepared.execute_unchecked(ins, b.outputs());  // the plugin's own validation
  };
  std::vector<DLTensor> in = b.input_tensors();
  in[0].data = nullptr;
  if (accepted(in)) fail("bad_arguments", name, c.label, "execute accepted a NULL data pointer");
  in = b.input_tensors();
  std::vector<int64_t> shape(in[0].shape, in[0].shape + in[0].ndim);
  shape.push_back(1);
  in[0].shape = shape.data();
  in[0].ndim += 1;
  if (accepted(in))
    fail("bad_arguments", name, c.label, "execute accepted input 0 of another rank than prepared");
  in = b.input_tensors();  // strides twice the compact ones: a view it was not prepared for
  std::vector<int64_t> strides(size_t(in[0].ndim), 0);
  for (int64_t d = in[0].ndim - 1, step = 2; d >= 0; step *= in[0].shape[d], --d)
    strides[size_t(d)] = step;
  in[0].strides = strides.data();
  int64_t elements = 1;
  for (int32_t d = 0; d < in[0].ndim; ++d) elements *= in[0].shape[d];
  if (elements > 1 && accepted(in))
    fail("bad_arguments", name, c.label, "execute accepted input 0 with non-compact strides");
  const size_t pos = c.op.op == SY_OP_KV_CACHE_APPEND          ? 1
                     : c.op.op == SY_OP_FUSED_DECODE_ATTENTION ? 4
                                                               : 0;
  if (pos) {
    in = b.input_tensors();
    // The first row past the cache (a paged pool: past its blocks), for every row written.
    const auto& cache = c.op.outputs[c.op.op == SY_OP_KV_CACHE_APPEND ? 0 : 1].shape;
    const bool paged = c.op.int_attr(SY_ATTR_PAGED).value_or(0) != 0;
    const int64_t rows = paged ? cache[0] * cache[1] : cache[1];
    std::vector<int64_t> beyond(size_t(paged ? in[0].shape[1] : 1), rows);
    in[pos].data = beyond.data();
    if (accepted(in))
      fail("bad_arguments", name, c.label,
           "execute accepted " + std::string(paged ? "slot " : "position ") + std::to_string(rows) +
               " of a cache of " + std::to_string(rows) + " rows");
  }
}

// Every packed layout the kernel names for the case's weights (ABI 1.10): the results on the
// packed weight must equal those on the stored one bit for bit; the kernel must refuse another
// layout, and pack_weight a layout it did not name.
int Run::packed_layouts(size_t index, uint32_t device, const DeviceInfo& dev, const GridCase& c,
                        PreparedKernel& stored) {
  int ran = 0;
  if (!plugin_.weight_layouts()) return ran;
  const std::string& name = plugin_.kernels()[index].kernel;
  const int first = sy_weight_input(c.op.op), count = sy_weight_input_count(c.op.op);
  for (int i = first; first >= 0 && i < first + count && i < int(c.op.inputs.size()); ++i) {
    const TensorDesc& w = c.op.inputs[size_t(i)];
    Expected<Plugin::WeightLayout> l = plugin_.weight_layout(index, device, c.op, size_t(i));
    if (!l) {
      fail("layout_failed", name, c.label, l.error().what());
      return ran;
    }
    if (l->id == 0) continue;
    const std::string what =
        "layout " + std::to_string(l->id) + " ('" + l->name + "') of input " + std::to_string(i);
    OpDesc foreign = c.op;
    foreign.inputs[size_t(i)].layout = l->id + 1;
    if (plugin_.check(index, dev, foreign).accepted)
      fail("accepts_foreign_layout", name, c.label,
           "check accepted input " + std::to_string(i) + " in layout " + std::to_string(l->id + 1) +
               ", which weight_layout never named");
    OpDesc packed_op = c.op;
    packed_op.inputs[size_t(i)].layout = l->id;
    auto packed = prepare_kernel(plugin_, index, device, packed_op);
    if (!packed) {
      fail("packed_differs", name, c.label,
           "weight_layout named " + what + ", and prepare refused it: " + packed.error().message);
      return ran;
    }
    Buffers want(c.op, opts_.seed + ++seed_, c.actual_inputs, c.actual_outputs), got = want;
    std::vector<DLTensor> ins = got.input_tensors();
    std::vector<uint8_t> bytes(size_t(l->bytes));
    if (plugin_.pack_weight(device, l->id + 1, w, ins[size_t(i)].data, bytes.data(),
                            uint64_t(l->bytes)) == std::nullopt)
      fail("packs_unknown_layout", name, c.label,
           "pack_weight accepted layout " + std::to_string(l->id + 1) +
               ", which weight_layout never named");
    if (auto e = plugin_.pack_weight(device, l->id, w, ins[size_t(i)].data, bytes.data(),
                                     uint64_t(l->bytes))) {
      fail("packed_differs", name, c.label, "pack_weight of " + what + ": " + e->what());
      return ran;
    }
    ins[size_t(i)].data = bytes.data();
    std::vector<const DLTensor*> in_ptrs;
    for (const DLTensor& t : ins) in_ptrs.push_back(&t);
    if (auto e = stored.execute(want.inputs(), want.outputs())) return ran;  // compared above
    if (auto e = (*packed)->execute(in_ptrs, got.outputs())) {
      fail("packed_differs", name, c.label, "execute on " + what + ": " + e->what());
      return ran;
    }
    if (std::string diff = got.differs_from(want, true); !diff.empty())
      fail("packed_differs", name, c.label, what + " changed the results: " + diff);
    ran = 1;
  }
  return ran;
}

// Two kernels prepared for the case, run at once on two threads with different inputs, each
// checked against what it computes alone.
void Run::two_threads(size_t index, uint32_t device, const GridCase& c) {
  const std::string& name = plugin_.kernels()[index].kernel;
  auto k1 = prepare_kernel(plugin_, index, device, c.op);
  auto k2 = prepare_kernel(plugin_, index, device, c.op);
  if (!k1 || !k2) return;
  Buffers a(c.op, 101, c.actual_inputs, c.actual_outputs),
      b(c.op, 202, c.actual_inputs, c.actual_outputs), a_alone = a, b_alone = b;
  if ((*k1)->execute(a_alone.inputs(), a_alone.outputs()) ||
      (*k1)->execute(b_alone.inputs(), b_alone.outputs()))
    return;
  for (int round = 0; round < 20; ++round) {
    Buffers ra = a, rb = b;
    std::thread t1([&] { (*k1)->execute(ra.inputs(), ra.outputs()); });
    std::thread t2([&] { (*k2)->execute(rb.inputs(), rb.outputs()); });
    t1.join();
    t2.join();
    std::string diff = ra.differs_from(a_alone, true);
    if (diff.empty()) diff = rb.differs_from(b_alone, true);
    if (!diff.empty())
      return fail("not_thread_safe", name, c.label,
                  "two prepared kernels run at once on two threads (round " +
                      std::to_string(round) + "): " + diff);
  }
}

}  // namespace

ConformanceReport conformance::run_with(const std::filesystem::path& path,
                                        const ConformanceOptions& o, const Hooks& hooks) {
  const auto t0 = std::chrono::steady_clock::now();
  ConformanceReport r;
  r.path = path.string();
  r.sha256 = file_sha256(path);
  // Conformance makes its own judgements: the loader's capability probe would refuse a plugin
  // whose check lies before it could be named, and a plugin under development may have no
  // manifest yet.
  LoadOptions load;
  load.require_manifest = false;
  load.probe_capabilities = false;
  auto loaded = load_plugin(path, load);
  if (!loaded.plugin) {
    r.load_error =
        std::string(load_stage_name(loaded.diagnostic->stage)) + ": " + loaded.diagnostic->reason;
    return r;
  }
  const Plugin& p = *loaded.plugin;
  r.plugin = p.name();
  r.version = p.version();
  r.abi_major = p.abi_major();
  r.abi_minor = p.abi_minor();
  for (const DeviceInfo& d : p.devices()) r.executed |= d.available && d.memory_is_host;
  std::unique_ptr<Plugin> reference;
  if (r.executed) {  // without the reference nothing can be checked for numbers: a failure
    auto ref = load_plugin(o.reference, LoadOptions{});
    if (!ref.plugin)
      r.failures.push_back({"no_reference", "", "",
                            "the reference plugin " + o.reference.string() + " does not load (" +
                                (ref.diagnostic ? ref.diagnostic->reason : "?") +
                                "): results cannot be checked"});
    reference = std::move(ref.plugin);
  }
  Run run(p, reference.get(), o, hooks, r);
  for (size_t i = 0; i < p.kernels().size(); ++i)
    if (o.kernel.empty() || p.kernels()[i].kernel == o.kernel) run.kernel(i);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

ConformanceReport run_conformance(const std::filesystem::path& plugin,
                                  const ConformanceOptions& options) {
  return conformance::run_with(plugin, options, Hooks{});
}

}  // namespace sy
