// Discovery over a folder of real, deliberately broken shared objects: each yields its
// diagnostic at the right stage, the good ones still load, nothing crashes.
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <map>

#include "core/registry/registry.hpp"
#include "support/test_paths.hpp"

namespace sy {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const PluginRecord& record(const Registry& reg, const std::string& stem) {
  for (const auto& r : reg.records())
    if (r.path.stem() == stem) return r;
  throw std::runtime_error("no record for " + stem);
}

class BrokenPlugins : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    registry_ = new Registry(Registry::discover({{test::kBrokenDir}, "test"}, LoadOptions{}));
  }
  static void TearDownTestSuite() { delete registry_; }
  void expect_failure(const std::string& stem, LoadStage stage, const std::string& reason) {
    const PluginRecord& r = record(*registry_, stem);
    ASSERT_FALSE(r.loaded()) << stem;
    ASSERT_TRUE(r.diagnostic);
    EXPECT_EQ(load_stage_name(r.diagnostic->stage), std::string(load_stage_name(stage))) << stem;
    EXPECT_THAT(r.diagnostic->reason, HasSubstr(reason)) << stem;
    EXPECT_FALSE(r.diagnostic->hint.empty()) << stem;
    EXPECT_EQ(r.diagnostic->path, r.path);
  }
  static Registry* registry_;
};
Registry* BrokenPlugins::registry_ = nullptr;

TEST_F(BrokenPlugins, OneRecordPerSharedObject) {
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(test::kBrokenDir))
    files += e.path().extension() == ".so";
  EXPECT_EQ(registry_->records().size(), files);
  EXPECT_GE(files, 11u);
}

TEST_F(BrokenPlugins, GoodNeighbourAndZeroDevicePluginsLoad) {
  EXPECT_TRUE(registry_->find("good_neighbor"));
  const Plugin* zero = registry_->find("zero_devices");
  ASSERT_TRUE(zero);
  EXPECT_TRUE(zero->devices().empty());
  EXPECT_EQ(zero->no_devices_reason(), "test: no test hardware attached");
}

TEST_F(BrokenPlugins, NotASharedObject) {
  expect_failure("not_a_plugin", LoadStage::open, "not_a_plugin.so");
}
TEST_F(BrokenPlugins, MissingDependencyNamesTheLibrary) {
  expect_failure("missing_dep", LoadStage::open, "libsy_test_vanished.so");
}
TEST_F(BrokenPlugins, NoEntrySymbol) {
  expect_failure("no_entry", LoadStage::entry, "sy_plugin_entry");
}
TEST_F(BrokenPlugins, AbiMajorTooNew) {
  expect_failure("abi_major_new", LoadStage::abi, "plugin ABI 2.10, host accepts ABI 1.0..10");
}
TEST_F(BrokenPlugins, AbiMajorTooOld) {
  expect_failure("abi_major_old", LoadStage::abi, "plugin ABI 0.10, host accepts ABI 1.0..10");
}
TEST_F(BrokenPlugins, UndersizedFunctionTable) {
  expect_failure("small_table", LoadStage::abi, "smaller than");
}
TEST_F(BrokenPlugins, InitFailureCarriesStatusAndMessage) {
  expect_failure("init_fails", LoadStage::init, "UNAVAILABLE: test: simulated init failure");
}
TEST_F(BrokenPlugins, ManifestDrift) {
  expect_failure("manifest_drift", LoadStage::manifest, "kernel 'add_f32' dtypes");
}
TEST_F(BrokenPlugins, CheckThatAcceptsOutsideItsEnvelope) {
  expect_failure("lying_check", LoadStage::capability, "kernel 'add_f32' check() accepts");
}
// A plugin that kills the process while loading is a failed plugin: the probe child died, the
// host never opened it (this test process is alive to say so), and says with which signal.
TEST_F(BrokenPlugins, AnIllegalInstructionWhileLoadingIsAFailedPlugin) {
  expect_failure("illegal_at_load", LoadStage::probe, "SIGILL (Illegal instruction)");
  EXPECT_THAT(record(*registry_, "illegal_at_load").diagnostic->hint,
              HasSubstr("instruction this CPU lacks"));
  EXPECT_EQ(record(*registry_, "illegal_at_load").diagnostic->code(), Errc::plugin_probe);
}
TEST_F(BrokenPlugins, ASegfaultInTheEntryIsAFailedPlugin) {
  expect_failure("segfault_in_entry", LoadStage::probe, "SIGSEGV (Segmentation fault)");
}

// A copy of a good plugin (and its manifest) in a folder we can change the mode of.
class PluginFolder {
 public:
  PluginFolder() {
    for (const char* f : {"good_minor1.so", "good_minor1.json"})
      fs::copy_file(test::kGoodDir / f, dir_.path() / f);
  }
  const fs::path& path() const { return dir_.path(); }

 private:
  test::TempDir dir_;
};

TEST(PluginSecurity, WorldWritableDirectoryIsRefusedWithReason) {
  PluginFolder folder;
  ::chmod(folder.path().c_str(), 0777);
  Registry reg = Registry::discover({{folder.path()}, "test"}, LoadOptions{});
  ASSERT_EQ(reg.records().size(), 1u);
  EXPECT_FALSE(reg.records()[0].loaded());
  EXPECT_THAT(reg.records()[0].diagnostic->reason, HasSubstr("world-writable"));
  ::chmod(folder.path().c_str(), 0755);
  EXPECT_TRUE(Registry::discover({{folder.path()}, "test"}, LoadOptions{}).find("good_minor1"));
}

TEST(PluginSecurity, WorldWritablePluginFileIsRefused) {
  PluginFolder folder;
  ::chmod((folder.path() / "good_minor1.so").c_str(), 0666);
  Registry reg = Registry::discover({{folder.path()}, "test"}, LoadOptions{});
  ASSERT_EQ(reg.records().size(), 1u);
  EXPECT_EQ(reg.records()[0].diagnostic->stage, LoadStage::open);
  EXPECT_THAT(reg.records()[0].diagnostic->reason, HasSubstr("world-writable"));
}

TEST(PluginManifest, MissingManifestFailsAtManifestStage) {
  PluginFolder folder;
  fs::remove(folder.path() / "good_minor1.json");
  Registry reg = Registry::discover({{folder.path()}, "test"}, LoadOptions{});
  ASSERT_EQ(reg.records().size(), 1u);
  EXPECT_EQ(reg.records()[0].diagnostic->stage, LoadStage::manifest);
  EXPECT_THAT(reg.records()[0].diagnostic->hint, HasSubstr("switchyard manifest"));
}

TEST(PluginDiscovery, MissingDirectoryIsReportedNotIgnored) {
  Registry reg = Registry::discover({{"/nonexistent/switchyard/plugins"}, "test"}, LoadOptions{});
  ASSERT_EQ(reg.records().size(), 1u);
  EXPECT_THAT(reg.records()[0].diagnostic->reason, HasSubstr("does not exist"));
}

// The second copy is refused right after its abi stage: its init never runs.
TEST(PluginDiscovery, DuplicateNameLoadsFirstAndReportsSecondBeforeItsInit) {
  PluginFolder a, b;
  Registry reg = Registry::discover({{a.path(), b.path()}, "test"}, LoadOptions{});
  ASSERT_EQ(reg.records().size(), 2u);
  EXPECT_TRUE(reg.records()[0].loaded());
  EXPECT_FALSE(reg.records()[1].loaded());
  EXPECT_THAT(reg.records()[1].diagnostic->reason, HasSubstr("duplicate plugin name"));
  EXPECT_EQ(reg.records()[1].diagnostic->code(), Errc::plugin_entry);
  auto init_count = [](const fs::path& so) {
    void* h = ::dlopen(so.c_str(), RTLD_NOW | RTLD_NOLOAD);  // the loader's copy, still mapped
    EXPECT_TRUE(h) << so;
    auto fn = h ? reinterpret_cast<int* (*)()>(::dlsym(h, "sy_test_counters")) : nullptr;
    return fn ? *fn() : -1;  // the counters start with init
  };
  EXPECT_EQ(init_count(a.path() / "good_minor1.so"), 1);
  EXPECT_EQ(init_count(b.path() / "good_minor1.so"), 0);
}

}  // namespace
}  // namespace sy
