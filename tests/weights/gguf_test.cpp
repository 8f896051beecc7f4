// The GGUF reader: a file written by the format's reference writer (PyPI gguf 0.19.0,
// tests/fixtures/gguf/make_fixtures.py) reads back exactly, every metadata value and tensor byte;
// files of our own test builder, versions 2 and 3, every GGML type the reader knows, a custom
// alignment, round-trip; and every broken field is an Error SY302 naming the field or tensor,
// never a crash or a read past the end (every truncation of a real file included). write_gguf:
// the reference writer's file, read and written again, is its bytes exactly; what the reader
// would refuse is refused by name, and no file is left.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/errors/error.hpp"
#include "core/weights/gguf.hpp"
#include "support/gguf_builder.hpp"
#include "support/little_endian.hpp"
#include "support/test_paths.hpp"

namespace sy {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::GgufBuilder;

const fs::path kGgufFixtures = fs::path(SY_TEST_FIXTURES_DIR) / "gguf";

GgufFile parse(const std::string& bytes) {
  return GgufFile::parse(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
                         "test.gguf");
}

// Parsing `bytes` is Error SY302 at test.gguf whose message holds `needle`.
void expect_gguf_refused(const std::string& bytes, const std::string& needle) {
  try {
    parse(bytes);
    ADD_FAILURE() << "parsed; expected SY302 with '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code, Errc::bad_weights) << e.what();
    EXPECT_EQ(e.where, "test.gguf");
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << needle << " | " << e.what();
  }
}

std::string hex(const void* p, uint64_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (uint64_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<const unsigned char*>(p)[i];
    s += digits[c >> 4];
    s += digits[c & 15];
  }
  return s;
}

void expect_value(const GgufValue& v, const json& want, const std::string& key) {
  SCOPED_TRACE(key);
  if (want.is_boolean()) {
    EXPECT_EQ(v.type, GgufType::boolean);
    EXPECT_EQ(v.i, want.get<bool>() ? 1 : 0);
  } else if (want.is_string()) {
    EXPECT_EQ(v.s, want.get<std::string>());
  } else if (want.is_number_float()) {
    EXPECT_EQ(v.as_number(), want.get<double>());
  } else if (want.is_number_unsigned() && want.get<uint64_t>() > uint64_t(INT64_MAX)) {
    EXPECT_EQ(v.type, GgufType::u64);
    EXPECT_EQ(v.u, want.get<uint64_t>());
  } else if (want.is_number()) {
    EXPECT_EQ(v.as_int(), want.get<int64_t>());
  } else if (want.is_array() && !want.empty() && want[0].is_string()) {
    EXPECT_EQ(v.strings, want.get<std::vector<std::string>>());
  } else if (want.is_array() && !want.empty() && want[0].is_number_float()) {
    EXPECT_EQ(v.floats, want.get<std::vector<double>>());
  } else {
    EXPECT_EQ(v.as_int_array(), want.get<std::vector<int64_t>>());
  }
}

TEST(Gguf, TheReferenceWritersFileReadsBackExactly) {
  const json want = json::parse(test::file_contents(kGgufFixtures / "tiny.expected.json"));
  GgufFile f = GgufFile::open((kGgufFixtures / "tiny.gguf").string());
  EXPECT_EQ(f.version(), want["version"].get<uint32_t>());
  EXPECT_EQ(f.alignment(), want["alignment"].get<uint64_t>());
  ASSERT_NE(f.value("general.architecture"), nullptr);
  EXPECT_EQ(f.value("general.architecture")->s, "llama");
  for (const auto& [key, value] : want["metadata"].items()) {
    ASSERT_NE(f.value(key), nullptr) << key;
    expect_value(*f.value(key), value, key);
  }
  ASSERT_EQ(f.tensors().size(), want["tensors"].size());
  for (const auto& [name, t] : want["tensors"].items()) {
    SCOPED_TRACE(name);
    const GgufTensor* got = f.find(name);
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(std::string(got->type->name), t["type"].get<std::string>());
    EXPECT_EQ(got->dims, t["dims"].get<std::vector<int64_t>>());
    EXPECT_EQ(got->offset % f.alignment(), 0u);
    EXPECT_EQ(hex(f.data(*got), got->bytes), t["bytes_hex"].get<std::string>());
  }
}

TEST(Gguf, EveryTruncationOfARealFileIsRefused) {
  const std::string bytes = test::file_contents(kGgufFixtures / "tiny.gguf");
  ASSERT_GT(bytes.size(), 1000u);
  for (size_t n = 0; n < bytes.size(); ++n) {
    try {
      parse(bytes.substr(0, n));
      ADD_FAILURE() << "a prefix of " << n << " bytes parsed";
    } catch (const Error& e) {
      ASSERT_EQ(e.code, Errc::bad_weights) << n << ": " << e.what();
    }
  }
}

// Versions 2 and 3, a 64-byte alignment, one tensor of every GGML type the reader knows.
TEST(Gguf, OurBuilderRoundTripsEveryKnownTypeAndVersion) {
  std::vector<const GgmlType*> types;
  for (uint32_t id = 0; id < 64; ++id)
    if (const GgmlType* t = ggml_type(id)) types.push_back(t);
  ASSERT_GE(types.size(), 30u);
  std::mt19937 rng(7);
  for (uint32_t version : {2u, 3u}) {
    SCOPED_TRACE(version);
    GgufBuilder b;
    b.header(version, types.size(), 2).kv_u32("general.alignment", 64).kv_string("k", "v");
    std::vector<std::string> data;
    uint64_t offset = 0;
    for (const GgmlType* t : types) {
      uint64_t bytes = uint64_t(t->block_bytes) * 2 * 3;
      b.tensor_info(t->name, {uint64_t(t->block_elements) * 2, 3}, t->id, offset);
      std::string d(bytes, '\0');
      for (char& c : d) c = char(rng());
      data.push_back(d);
      offset += (bytes + 63) / 64 * 64;
    }
    b.pad_to(64);
    for (const std::string& d : data) b.raw(d.data(), d.size()).pad_to(64, '\x77');
    GgufFile f = parse(b.bytes);
    EXPECT_EQ(f.version(), version);
    EXPECT_EQ(f.alignment(), 64u);
    EXPECT_EQ(f.value("k")->s, "v");
    for (size_t i = 0; i < types.size(); ++i) {
      const GgufTensor* t = f.find(types[i]->name);
      ASSERT_NE(t, nullptr) << types[i]->name;
      EXPECT_EQ(t->type, types[i]);
      EXPECT_EQ(t->dims, (std::vector<int64_t>{types[i]->block_elements * 2, 3}));
      EXPECT_EQ(t->elements(), types[i]->block_elements * 6);
      ASSERT_EQ(t->bytes, data[i].size());
      EXPECT_EQ(std::string(static_cast<const char*>(f.data(*t)), t->bytes), data[i]);
    }
  }
}

// A file with one metadata entry whose value bytes follow `key` (type and value) and no tensor.
std::string with_value(uint32_t type, const std::string& value_bytes) {
  GgufBuilder b;
  b.header(3, 0, 1).key("x", type);
  b.bytes += value_bytes;
  return b.bytes;
}

using test::le32;
using test::le64;

TEST(Gguf, BrokenHeadersAndValuesAreRefusedByField) {
  expect_gguf_refused("", "the magic number");
  expect_gguf_refused("GGML\x03\0\0\0", "not a GGUF file");
  expect_gguf_refused(std::string("FUGG\0\0\0\3", 8), "big-endian");
  GgufBuilder v1, v4, v0;
  expect_gguf_refused(v1.header(1, 0, 0).bytes, "version 1");
  expect_gguf_refused(v4.header(4, 0, 0).bytes, "too new");
  expect_gguf_refused(v0.header(0, 0, 0).bytes, "version 0");
  GgufBuilder many;
  expect_gguf_refused(many.header(3, 0, uint64_t(1) << 60).bytes, "metadata count");
  GgufBuilder tensors;
  expect_gguf_refused(tensors.header(3, uint64_t(1) << 60, 0).bytes, "tensor count");
  expect_gguf_refused(with_value(13, ""), "unknown value type 13");
  expect_gguf_refused(with_value(7, "\x02"), "bool holding 2");
  expect_gguf_refused(with_value(8, le64(uint64_t(1) << 40)), "bytes of text");
  expect_gguf_refused(with_value(9, le32(9) + le64(1)), "arrays of arrays");
  expect_gguf_refused(with_value(9, le32(20) + le64(1)), "unknown array element type 20");
  expect_gguf_refused(with_value(9, le32(4) + le64(uint64_t(1) << 40)), "does not fit");
  expect_gguf_refused(with_value(9, le32(8) + le64(2) + le64(1) + "a" + le64(100)), "element 1");
  expect_gguf_refused(with_value(4, "\x01\x02"), "metadata 'x'");
  GgufBuilder twice;
  expect_gguf_refused(twice.header(3, 0, 2).kv_u32("a", 1).kv_u32("a", 2).bytes,
                      "'a' appears twice");
  for (auto [type, value, needle] : std::vector<std::tuple<uint32_t, uint64_t, std::string>>{
           {4, 0, "not a power of two"}, {4, 48, "not a power of two"}, {10, 32, "not u32"}}) {
    GgufBuilder b;
    b.header(3, 0, 1).key("general.alignment", type);
    if (type == 4)
      b.u32(uint32_t(value));
    else
      b.u64(value);
    expect_gguf_refused(b.bytes, needle);
  }
}

// One tensor info (name "t") and `data_bytes` bytes after the 32-byte aligned header.
std::string one_tensor(const std::vector<uint64_t>& dims, uint32_t type, uint64_t offset,
                       size_t data_bytes) {
  GgufBuilder b;
  b.header(3, 1, 0).tensor_info("t", dims, type, offset).pad_to(32).fill(data_bytes, '\x11');
  return b.bytes;
}

TEST(Gguf, BrokenTensorInfosAreRefusedByTensor) {
  expect_gguf_refused(one_tensor({}, 0, 0, 64), "tensor 't' has 0 dimensions");
  expect_gguf_refused(one_tensor({1, 1, 1, 1, 1}, 0, 0, 64), "has 5 dimensions");
  expect_gguf_refused(one_tensor({uint64_t(1) << 63, 1}, 0, 0, 64), "element count overflow");
  expect_gguf_refused(one_tensor({uint64_t(1) << 40, uint64_t(1) << 40}, 0, 0, 64), "overflow");
  expect_gguf_refused(one_tensor({32}, 4, 0, 64), "GGML type 4, which is unknown");
  expect_gguf_refused(one_tensor({32}, 31, 0, 64), "GGML type 31, which is unknown");
  expect_gguf_refused(one_tensor({48}, 12, 0, 1024), "not whole Q4_K blocks of 256");
  expect_gguf_refused(one_tensor({16}, 0, 8, 128), "not a multiple of the 32-byte alignment");
  expect_gguf_refused(one_tensor({16}, 0, 0, 63), "lie outside the file");
  expect_gguf_refused(one_tensor({16}, 0, uint64_t(1) << 63, 64), "lie outside the file");
  GgufBuilder adjacent;
  adjacent.header(3, 2, 0).tensor_info("a", {8}, 0, 0).tensor_info("b", {16}, 0, 32);
  adjacent.pad_to(32).fill(96, 0);
  EXPECT_NO_THROW(parse(adjacent.bytes));
  GgufBuilder shared;
  shared.header(3, 2, 0).tensor_info("a", {16}, 0, 0).tensor_info("b", {8}, 0, 32);
  shared.pad_to(32).fill(64, 0);
  expect_gguf_refused(shared.bytes, "tensors 'a' and 'b' share bytes");
  GgufBuilder same;
  same.header(3, 2, 0).tensor_info("a", {8}, 0, 0).tensor_info("a", {8}, 0, 32);
  expect_gguf_refused(same.pad_to(32).fill(64, 0).bytes, "tensor 'a' appears twice");
}

TEST(Gguf, MissingFileIsRefusedWithItsPath) {
  try {
    GgufFile::open("/nonexistent/model.gguf");
    ADD_FAILURE() << "opened";
  } catch (const Error& e) {
    EXPECT_EQ(e.code, Errc::bad_weights);
    EXPECT_EQ(e.where, "/nonexistent/model.gguf");
    EXPECT_NE(std::string(e.what()).find("cannot open it"), std::string::npos) << e.what();
  }
}

// The keys of tiny.gguf in the order make_fixtures.py adds them (GGUFWriter keeps that order).
const std::vector<std::string> kFixtureKeyOrder = {"general.architecture",
                                                   "test.u8",
                                                   "test.i8",
                                                   "test.u16",
                                                   "test.i16",
                                                   "test.u32",
                                                   "test.i32",
                                                   "test.f32",
                                                   "test.bool",
                                                   "test.string",
                                                   "test.u64",
                                                   "test.i64",
                                                   "test.f64",
                                                   "test.strings",
                                                   "test.ints",
                                                   "test.floats"};

TEST(GgufWrite, TheReferenceWritersFileWrittenAgainIsItsBytes) {
  const fs::path fixture = kGgufFixtures / "tiny.gguf";
  GgufFile f = GgufFile::open(fixture.string());
  ASSERT_EQ(f.metadata().size(), kFixtureKeyOrder.size());
  std::vector<std::pair<std::string, GgufValue>> metadata;
  for (const std::string& key : kFixtureKeyOrder) {
    ASSERT_NE(f.value(key), nullptr) << key;
    metadata.emplace_back(key, *f.value(key));
  }
  std::vector<GgufTensorData> tensors;
  for (const GgufTensor& t : f.tensors())
    tensors.push_back({t.name, t.type->id, t.dims, f.data(t), t.bytes});
  test::TempDir dir;
  const fs::path out = dir.path() / "again.gguf";
  write_gguf(out.string(), metadata, tensors);
  const std::string want = test::file_contents(fixture), got = test::file_contents(out);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_TRUE(got == want) << "first difference at byte "
                           << std::mismatch(got.begin(), got.end(), want.begin()).first -
                                  got.begin();
}

TEST(GgufWrite, WhatTheReaderWouldRefuseIsRefusedByNameAndNoFileIsLeft) {
  test::TempDir dir;
  const std::string path = (dir.path() / "bad.gguf").string();
  GgufValue text;
  text.type = GgufType::string, text.s = "llama";
  const std::vector<float> row(32, 1.f);
  const GgufTensorData ok{"w", 0, {32}, row.data(), 128};
  const auto expect_write_refused = [&](const std::vector<std::pair<std::string, GgufValue>>& meta,
                                        const std::vector<GgufTensorData>& tensors,
                                        const std::string& needle) {
    try {
      write_gguf(path, meta, tensors);
      ADD_FAILURE() << "written; expected a refusal with '" << needle << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    EXPECT_TRUE(fs::is_empty(dir.path())) << "a file was left behind for: " << needle;
  };
  expect_write_refused({{"a", text}, {"a", text}}, {ok}, "metadata 'a' appears twice");
  expect_write_refused({{"general.alignment", text}}, {ok}, "'general.alignment' is not written");
  GgufValue nested = text;
  nested.type = GgufType::array, nested.element_type = GgufType::array, nested.uints = {1};
  expect_write_refused({{"n", nested}}, {ok}, "metadata 'n' is an array of arrays");
  nested.uints.clear();  // refused however few elements it has
  expect_write_refused({{"n", nested}}, {ok}, "metadata 'n' is an array of arrays");
  expect_write_refused({}, {ok, ok}, "tensor 'w' appears twice");
  expect_write_refused({}, {{"t", 99, {32}, row.data(), 128}}, "tensor 't' has GGML type 99");
  expect_write_refused({}, {{"t", 0, {}, row.data(), 0}}, "tensor 't' has no or more than 4 dims");
  expect_write_refused({}, {{"t", 0, {32, 0}, row.data(), 0}}, "a dimension that is not positive");
  expect_write_refused({}, {{"t", 8, {16}, row.data(), 17}}, "rows are not whole Q8_0 blocks");
  expect_write_refused({}, {{"t", 0, {32}, row.data(), 64}}, "holds 64 bytes, its dims make 128");
  write_gguf(path, {{"general.architecture", text}}, {ok});
  GgufFile back = GgufFile::open(path);
  ASSERT_EQ(back.tensors().size(), 1u);
  EXPECT_EQ(hex(back.data(back.tensors()[0]), 128), hex(row.data(), 128));
}

}  // namespace
}  // namespace sy
