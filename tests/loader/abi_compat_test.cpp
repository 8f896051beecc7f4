// ABI versioning from both sides, and struct_size growth in both directions: this new host
// (1.2) with plugins built for 1.0, 1.1 and 1.2. (The old-host half is abi/old_host.c, C hosts
// built against minors 0 and 1.)
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include "core/plugin/kernel.hpp"
#include "core/plugin/loader.hpp"
#include "core/registry/registry.hpp"
#include "support/ops.hpp"
#include "support/test_paths.hpp"

namespace sy {
namespace {

std::unique_ptr<Plugin> load_or_fail(const std::filesystem::path& p) {
  auto out = load_plugin(p, LoadOptions{});
  EXPECT_TRUE(out.plugin) << p << ": " << (out.diagnostic ? out.diagnostic->reason : "");
  return std::move(out.plugin);
}

OpDesc add_op(sy_dtype dt = SY_DTYPE_F32) {
  OpDesc op;
  op.op = SY_OP_ADD;
  op.inputs = {{dt, {4}, SY_MEMORY_HOST}, {dt, {4}, SY_MEMORY_HOST}};
  op.outputs = {{dt, {4}, SY_MEMORY_HOST}};
  return op;
}

TEST(AbiVersions, NewHostLoadsMinor0PluginAndNeverReadsMinor1Slots) {
  auto p = load_or_fail(test::kGoodDir / "good_minor0.so");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->abi_minor(), 0u);
  EXPECT_EQ(p->negotiated_minor(), 0u);
  EXPECT_EQ(p->api().struct_size, SY_PLUGIN_API_SIZE_MINOR0);
  EXPECT_LT(p->api().struct_size, sizeof(sy_plugin_api));
  EXPECT_FALSE(p->memory_info(0).has_value());  // optional minor-1 slot: unsupported
  ASSERT_EQ(p->devices().size(), 1u);
  ASSERT_EQ(p->kernels().size(), 1u);
}

TEST(AbiVersions, NewHostUsesMinor1SlotOfMinor1Plugin) {
  auto p = load_or_fail(test::kGoodDir / "good_minor1.so");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->abi_minor(), 1u);
  EXPECT_EQ(p->negotiated_minor(), 1u);
  EXPECT_EQ(p->api().struct_size, SY_PLUGIN_API_SIZE_MINOR_1);
  auto info = p->memory_info(0);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->total_bytes, 4096u);
  EXPECT_FALSE(p->synchronize(0));  // no minor-2 slot: execute is synchronous, nothing to wait
}

// What a test plugin counts of the host's calls (tests/plugins/test_plugin.c).
struct Counters {
  int init, shutdown, destroy, release, release_kernel, synchronize;
};
Counters* counters_of(const std::filesystem::path& so) {
  // The loader keeps the library mapped (RTLD_NODELETE): this finds the same copy.
  void* h = ::dlopen(so.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (!h) return nullptr;
  auto fn = reinterpret_cast<Counters* (*)()>(::dlsym(h, "sy_test_counters"));
  return fn ? fn() : nullptr;
}

// A minor-4 check declares its kernel's workspace and the host reads it; a minor-3 plugin's
// check has no such field, so its workspace is 0.
TEST(AbiVersions, WorkspaceCrossesFromMinor4PluginsOnly) {
  auto p4 = load_or_fail(test::kGoodDir / "good_minor4.so");
  ASSERT_TRUE(p4);
  EXPECT_EQ(p4->negotiated_minor(), 4u);
  const std::vector<int64_t> shape{4};
  OpDesc op;
  op.op = SY_OP_ADD;
  op.inputs = {{SY_DTYPE_F32, shape, SY_MEMORY_HOST}, {SY_DTYPE_F32, shape, SY_MEMORY_HOST}};
  op.outputs = {{SY_DTYPE_F32, shape, SY_MEMORY_HOST}};
  CheckResult r4 = p4->check(0, p4->devices()[0], op);
  ASSERT_TRUE(r4.accepted);
  EXPECT_EQ(r4.workspace_bytes, 4096u);
  auto p3 = load_or_fail(test::kGoodDir / "good_minor3.so");
  ASSERT_TRUE(p3);
  CheckResult r3 = p3->check(0, p3->devices()[0], op);
  ASSERT_TRUE(r3.accepted);
  EXPECT_EQ(r3.workspace_bytes, 0u);
}

// The varlen feature crosses from a minor-5 plugin only: a minor-4 build sets the same bit in
// its envelope, and the host drops it (the dynamic extents it promises did not exist then).
TEST(AbiVersions, VarlenCrossesFromMinor5PluginsOnly) {
  auto p5 = load_or_fail(test::kGoodDir / "good_minor5.so");
  auto p4 = load_or_fail(test::kGoodDir / "good_minor4.so");
  ASSERT_TRUE(p5 && p4);
  EXPECT_EQ(p5->negotiated_minor(), 5u);
  EXPECT_EQ(p4->negotiated_minor(), 4u);
  EXPECT_EQ(p5->kernels()[0].features, SY_FEATURE_BIT(SY_FEATURE_VARLEN));
  EXPECT_EQ(p4->kernels()[0].features, 0u);
  OpDesc op = add_op();
  for (auto& t : op.inputs) t.shape = {8}, t.dynamic_dims = 1;
  op.outputs[0].shape = {8};
  op.outputs[0].dynamic_dims = 1;
  EXPECT_TRUE(p5->check(0, p5->devices()[0], op).accepted);
  CheckResult r4 = p4->check(0, p4->devices()[0], op);
  EXPECT_TRUE(r4.accepted) << "the plugin's own check believes its bit";
  EXPECT_FALSE(envelope_refusals(p4->kernels()[0], op, p4->devices()[0]).empty())
      << "the host's envelope, which the planner trusts, does not";
}

// A kernel prepared for dynamic dims runs on the step's actual extents: 3 of 8 elements, the
// rest of the output untouched. Extents above the bound, or that disagree, never reach it.
TEST(AbiVersions, DynamicDimsExecuteTheActualExtents) {
  auto p = load_or_fail(test::kGoodDir / "good_minor5.so");
  ASSERT_TRUE(p);
  OpDesc op = add_op();
  for (auto* list : {&op.inputs, &op.outputs})
    for (auto& t : *list) t.shape = {8}, t.dynamic_dims = 1;
  auto k = prepare_kernel(*p, 0, 0, op);
  ASSERT_TRUE(k) << k.error().message;
  std::vector<float> a{1, 2, 3, 4, 5, 6, 7, 8}, b(8, 10.f), c(8, -1.f);
  int64_t three[1] = {3}, nine[1] = {9}, two[1] = {2};
  auto tensor = [](std::vector<float>& v, int64_t* shape) {
    DLTensor t{};
    t.data = v.data();
    t.device = {kDLCPU, 0};
    t.ndim = 1;
    t.dtype = sy_dtype_to_dl(SY_DTYPE_F32);
    t.shape = shape;
    return t;
  };
  DLTensor ta = tensor(a, three), tb = tensor(b, three), tc = tensor(c, three);
  const DLTensor* in[] = {&ta, &tb};
  const DLTensor* out[] = {&tc};
  ASSERT_FALSE((*k)->execute(in, out));
  EXPECT_EQ(c, (std::vector<float>{11, 12, 13, -1, -1, -1, -1, -1}));
  tc.shape = nine;
  auto e = (*k)->execute(in, out);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("prepared for 1 to 8"), std::string::npos) << e->message;
  tc.shape = two;  // within bounds, but not a's extent: the plugin's own check refuses it
  e = (*k)->execute_unchecked(in, out);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("differ"), std::string::npos) << e->message;
}

// A minor-3 envelope's weight dtypes reach the host; a minor-2 plugin's envelope has none. The
// dtypes of 1.6 (q5_0, q5_1, iq4_nl) cross from a minor-6 plugin only, mxfp4 (1.7) from a minor-7
// one: every build of the test plugin sets both bits, and the host drops them from older ones.
TEST(AbiVersions, WeightDtypesCrossFromMinor3PluginsOnly) {
  auto p8 = load_or_fail(test::kGoodDir / "good_minor8.so");
  ASSERT_TRUE(p8);
  EXPECT_EQ(p8->negotiated_minor(), 8u);
  auto p7 = load_or_fail(test::kGoodDir / "good_minor7.so");
  ASSERT_TRUE(p7);
  EXPECT_EQ(p7->negotiated_minor(), 7u);
  EXPECT_EQ(p7->kernels()[0].weight_dtypes, SY_DTYPE_BIT(SY_DTYPE_Q8_0) |
                                                SY_DTYPE_BIT(SY_DTYPE_Q5_0) |
                                                SY_DTYPE_BIT(SY_DTYPE_MXFP4));
  auto p6 = load_or_fail(test::kGoodDir / "good_minor6.so");
  ASSERT_TRUE(p6);
  EXPECT_EQ(p6->negotiated_minor(), 6u);
  EXPECT_EQ(p6->kernels()[0].weight_dtypes,
            SY_DTYPE_BIT(SY_DTYPE_Q8_0) | SY_DTYPE_BIT(SY_DTYPE_Q5_0));
  auto p3 = load_or_fail(test::kGoodDir / "good_minor3.so");
  ASSERT_TRUE(p3);
  EXPECT_EQ(p3->negotiated_minor(), 3u);
  ASSERT_EQ(p3->kernels().size(), 1u);
  EXPECT_EQ(p3->kernels()[0].weight_dtypes, SY_DTYPE_BIT(SY_DTYPE_Q8_0));
  auto p2 = load_or_fail(test::kGoodDir / "good_minor2.so");
  ASSERT_TRUE(p2);
  EXPECT_EQ(p2->negotiated_minor(), 2u);
  EXPECT_EQ(p2->kernels()[0].weight_dtypes, 0u);
}

// The minor-2 slots are the ones used with a minor-2 plugin: synchronize, and the struct forms
// of release and shutdown instead of the old ones.
// activation_q8 (1.8) and activation_q16 (1.9) are numerics claims: builds 4 to 7 of the test
// plugin set bit 17 and builds 4 to 8 bit 18, which meant nothing then, and the host drops each
// from a plugin older than its minor; the minor-9 and minor-10 builds claim neither.
TEST(AbiVersions, NumericsClaimsCrossFromTheirMinorOnly) {
  const uint64_t q8 = SY_FEATURE_BIT(SY_FEATURE_ACTIVATION_Q8);
  const uint64_t q16 = SY_FEATURE_BIT(SY_FEATURE_ACTIVATION_Q16);
  for (const char* name : {"good_minor4.so", "good_minor5.so", "good_minor7.so", "good_minor8.so",
                           "good_minor9.so", "good_minor10.so"}) {
    auto p = load_or_fail(test::kGoodDir / name);
    ASSERT_TRUE(p) << name;
    EXPECT_EQ(p->kernels()[0].features & (q8 | q16), 0u) << name;
  }
  EXPECT_EQ(load_or_fail(test::kGoodDir / "good_minor9.so")->negotiated_minor(), 9u);
  EXPECT_EQ(load_or_fail(test::kGoodDir / "good_minor10.so")->negotiated_minor(), 10u);
  EXPECT_STREQ(sy_feature_name(SY_FEATURE_ACTIVATION_Q8), "activation_q8");
  EXPECT_STREQ(sy_feature_name(SY_FEATURE_ACTIVATION_Q16), "activation_q16");
}

TEST(AbiVersions, NewHostUsesMinor2SlotsOfMinor2Plugin) {
  const auto so = test::kGoodDir / "good_minor2.so";
  auto p = load_or_fail(so);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->abi_minor(), 2u);
  EXPECT_EQ(p->negotiated_minor(), 2u);
  EXPECT_EQ(p->api().struct_size, SY_PLUGIN_API_SIZE_MINOR_2);
  Counters* c = counters_of(so);
  ASSERT_TRUE(c);
  const Counters before = *c;
  {
    auto k = prepare_kernel(*p, 0, 0, add_op());
    ASSERT_TRUE(k);
  }
  EXPECT_EQ(c->release_kernel, before.release_kernel + 1);
  EXPECT_EQ(c->release, before.release);
  EXPECT_FALSE(p->synchronize(0));
  EXPECT_EQ(c->synchronize, before.synchronize + 1);
  p.reset();
  EXPECT_EQ(c->destroy, before.destroy + 1);
  EXPECT_EQ(c->shutdown, before.shutdown);
}

// An older plugin on this host: its release and shutdown are the minor-0 slots.
TEST(AbiVersions, NewHostUsesMinor0SlotsOfOlderPlugins) {
  for (const char* name : {"good_minor0.so", "good_minor1.so"}) {
    const auto so = test::kGoodDir / name;
    auto p = load_or_fail(so);
    ASSERT_TRUE(p);
    Counters* c = counters_of(so);
    ASSERT_TRUE(c) << name;
    const Counters before = *c;
    {
      auto k = prepare_kernel(*p, 0, 0, add_op());
      ASSERT_TRUE(k);
    }
    EXPECT_EQ(c->release, before.release + 1) << name;
    p.reset();
    EXPECT_EQ(c->shutdown, before.shutdown + 1) << name;
  }
}

// A 1.2 plugin logs from init through the host info init's arguments carry (no global needed).
TEST(AbiVersions, InitReceivesTheHostInfo) {
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64);
  auto previous = spdlog::default_logger();
  auto logger = std::make_shared<spdlog::logger>("capture", sink);
  logger->set_level(spdlog::level::trace);
  spdlog::set_default_logger(logger);
  auto p = load_or_fail(test::kGoodDir / "good_minor2.so");
  spdlog::set_default_logger(previous);
  ASSERT_TRUE(p);
  int inits = 0;
  for (const auto& line : sink->last_formatted())
    if (line.find("[good_minor2] test plugin good_minor2 init") != std::string::npos) ++inits;
  EXPECT_EQ(inits, 1);
}

// A caller from the future passes a larger struct: the plugin uses the prefix it knows.
TEST(StructSize, CalleeAcceptsLargerStructFromNewerCaller) {
  auto p = load_or_fail(test::kGoodDir / "good_minor0.so");
  ASSERT_TRUE(p);
  struct FutureCheckArgs {
    sy_check_args base;
    uint64_t field_from_the_future;
  } future{};
  OpDesc op = add_op();
  AbiOpView view(op);
  AbiDeviceView dev(p->devices()[0]);
  future.base.struct_size = sizeof(future);
  future.base.plugin = p->instance();
  future.base.device = dev.get();
  future.base.op = view.get();
  future.field_from_the_future = ~0ull;
  ErrorText err;
  EXPECT_EQ(p->api().check(&future.base, err.buffer()), SY_STATUS_OK) << err.str();
  EXPECT_EQ(future.base.accepted, 1);
}

TEST(StructSize, CalleeRejectsSmallerStructWithClearStatus) {
  for (const char* name : {"good_minor1.so", "good_minor2.so"}) {
    auto p = load_or_fail(test::kGoodDir / name);
    ASSERT_TRUE(p);
    sy_check_args args{};
    args.struct_size = offsetof(sy_check_args, accepted);  // one field short
    ErrorText err;
    EXPECT_EQ(p->api().check(&args, err.buffer()), SY_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(err.str().find("sy_check_args"), std::string::npos) << err.str();
  }
  // The same rule in the real plugins.
  auto cpu = load_or_fail(test::kPluginDir / "cpu_onednn.so");
  ASSERT_TRUE(cpu);
  sy_init_args init{};
  init.struct_size = offsetof(sy_init_args, plugin);
  ErrorText err;
  EXPECT_EQ(cpu->api().init(&init, err.buffer()), SY_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(err.str().find("sy_init_args"), std::string::npos) << err.str();
}

TEST(StructSize, HostAcceptsLargerDeviceStructsFromNewerPlugins) {
  // Arrays cross as pointers, so a larger element does not shift the next one.
  auto p = load_or_fail(test::kGoodDir / "good_minor1.so");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->devices()[0].name, "test host device");
}

TEST(Check, RefusesOutsideTheEnvelopeWithReasons) {
  auto p = load_or_fail(test::kGoodDir / "good_minor1.so");
  ASSERT_TRUE(p);
  auto ok = p->check(0, p->devices()[0], add_op());
  EXPECT_TRUE(ok.accepted);
  EXPECT_TRUE(ok.refusals.empty());
  OpDesc bad = add_op(SY_DTYPE_F16);
  bad.outputs[0].shape = {5};
  auto r = p->check(0, p->devices()[0], bad);
  EXPECT_FALSE(r.accepted);
  EXPECT_EQ(test::constraints(r.refusals), (std::vector<std::string>{"dtype", "shape"}));
}

}  // namespace
}  // namespace sy
