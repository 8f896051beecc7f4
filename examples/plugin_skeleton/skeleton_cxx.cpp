// The skeleton plugin in C++ on the plugin kit (Switchyard::plugin_kit): the kit's shared edge
// supplies get_devices, get_kernels, check (envelope + operator contract + the kernel's limits),
// prepare (the same test), execute, release and destroy, every one guarded so no exception
// crosses the ABI. The plugin writes its device, its kernels and init. This one runs f32 mul.
#include <memory>

#include "cxx_edge/plugin_edge.hpp"

namespace {

// c = a · b, b broadcast over a's leading dimensions (the mul contract: b is a suffix of a).
class Mul {
 public:
  explicit Mul(const sy::edge::OpCopy& op)
      : n_(op.inputs[0].elements()), nb_(op.inputs[1].elements()) {}
  void run(const DLTensor* const* in, const DLTensor* const* out) {
    const auto* a = static_cast<const float*>(in[0]->data);
    const auto* b = static_cast<const float*>(in[1]->data);
    auto* c = static_cast<float*>(out[0]->data);
    for (int64_t i = 0; i < n_; ++i) c[i] = a[i] * b[i % nb_];
  }

 private:
  int64_t n_, nb_;
};

struct Context {};

std::unique_ptr<Mul> make_mul(const sy::edge::OpCopy& op, const Context&) {
  sy::edge::enforce_contract(op, "mul_f32");
  return std::make_unique<Mul>(op);
}

constexpr sy_kernel_envelope mul_envelope() {
  sy_kernel_envelope e{};
  e.struct_size = sizeof e;
  e.kernel = "mul_f32";
  e.op = SY_OP_MUL;
  e.family = "generic";
  e.device_type = kDLCPU;
  e.dtypes = SY_DTYPE_BIT(SY_DTYPE_F32);
  e.default_residency = SY_RESIDENCY_DEVICE;
  e.cost_hint = 4.0;  // a plain loop: the built-in kernels come first
  return e;
}

// One row per kernel: envelope, limits beyond envelope and contract (none), factory, workspace
// (none).
const sy::edge::KernelRow<Mul, Context> kRows[] = {{mul_envelope(), nullptr, make_mul, nullptr}};

}  // namespace

struct sy_plugin {
  using Impl = Mul;
  using Context = ::Context;
  static constexpr const char* kName = "skeleton_cxx";
  static const sy::edge::KernelList<Impl, Context>& kernels() {
    static const sy::edge::KernelSet<Impl, Context, 1> set(kRows);
    static const sy::edge::KernelList<Impl, Context> list = set.list();
    return list;
  }
  const sy_device_desc* const* device_list(size_t* count, const char** no_devices_reason) const {
    *count = 1;
    *no_devices_reason = nullptr;
    return devices;
  }
  sy_status ready(uint32_t index, sy_error_buffer* err) const {
    return index == 0 ? SY_STATUS_OK
                      : sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "no device %u", index);
  }
  sy_status context(size_t, uint32_t, Context&, sy_error_buffer*) const { return SY_STATUS_OK; }

  sy_device_desc device{};
  const sy_device_desc* devices[1] = {&device};
};

namespace {

sy_status init(sy_init_args* args, sy_error_buffer* err) {
  return sy::edge::guarded(sy_plugin::kName, err, [&] {
    if (!args || args->struct_size < SY_INIT_ARGS_SIZE_MINOR_0)
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_init_args undersized");
    auto* p = new sy_plugin();
    p->device.struct_size = sizeof p->device;
    p->device.name = "skeleton cpu";
    p->device.device_type = kDLCPU;
    p->device.arch = "generic";
    p->device.available = 1;
    p->device.memory_is_host = 1;
    args->plugin = p;
    return SY_STATUS_OK;
  });
}

constexpr sy_plugin_api make_api() {
  sy_plugin_api api{};
  api.struct_size = sizeof api;
  api.abi_major = SY_ABI_VERSION_MAJOR;
  api.abi_minor = SY_ABI_COMPAT_MINOR;
  api.plugin_name = sy_plugin::kName;
  api.plugin_version = "1.0.0";
  api.init = init;
  sy::edge::Edge<sy_plugin>::fill(api);
  return api;
}

constexpr sy_plugin_api kApi = make_api();

}  // namespace

extern "C" SY_EXPORT const sy_plugin_api* sy_plugin_entry(const sy_host_info*) {
  return &kApi;
}
