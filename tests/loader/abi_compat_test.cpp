// ABI versioning from both sides, and struct_size growth in both directions.
// (The old-host half lives in abi/old_host.c, a C host built against minor 0.)
#include <gtest/gtest.h>

#include "core/plugin/loader.hpp"
#include "core/registry/registry.hpp"
#include "support/ops.hpp"
#include "support/test_paths.hpp"

namespace sy {
namespace {

std::unique_ptr<Plugin> load(const std::filesystem::path& p) {
  auto out = load_plugin(p, LoadOptions{});
  EXPECT_TRUE(out.plugin) << p << ": " << (out.diagnostic ? out.diagnostic->reason : "");
  return std::move(out.plugin);
}

TEST(AbiVersions, NewHostLoadsMinor0PluginAndNeverReadsMinor1Slots) {
  auto p = load(test::kGoodDir / "good_minor0.so");
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
  auto p = load(test::kGoodDir / "good_minor1.so");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->negotiated_minor(), 1u);
  auto info = p->memory_info(0);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->total_bytes, 4096u);
}

OpDesc add_op(sy_dtype dt = SY_DTYPE_F32) {
  OpDesc op;
  op.op = SY_OP_ADD;
  op.inputs = {{dt, {4}, SY_MEMORY_HOST}, {dt, {4}, SY_MEMORY_HOST}};
  op.outputs = {{dt, {4}, SY_MEMORY_HOST}};
  return op;
}

// A caller from the future passes a larger struct: the plugin uses the prefix it knows.
TEST(StructSize, CalleeAcceptsLargerStructFromNewerCaller) {
  auto p = load(test::kGoodDir / "good_minor0.so");
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
  for (const char* name : {"good_minor1.so"}) {
    auto p = load(test::kGoodDir / name);
    ASSERT_TRUE(p);
    sy_check_args args{};
    args.struct_size = offsetof(sy_check_args, accepted);  // one field short
    ErrorText err;
    EXPECT_EQ(p->api().check(&args, err.buffer()), SY_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(err.str().find("sy_check_args"), std::string::npos) << err.str();
  }
  // The same rule in the real plugins.
  auto cpu = load(test::kPluginDir / "cpu_onednn.so");
  ASSERT_TRUE(cpu);
  sy_init_args init{};
  init.struct_size = offsetof(sy_init_args, plugin);
  ErrorText err;
  EXPECT_EQ(cpu->api().init(&init, err.buffer()), SY_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(err.str().find("sy_init_args"), std::string::npos) << err.str();
}

TEST(StructSize, HostAcceptsLargerDeviceStructsFromNewerPlugins) {
  // Arrays cross as pointers, so a larger element does not shift the next one.
  auto p = load(test::kGoodDir / "good_minor1.so");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->devices()[0].name, "test host device");
}

TEST(Check, RefusesOutsideTheEnvelopeWithReasons) {
  auto p = load(test::kGoodDir / "good_minor1.so");
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
