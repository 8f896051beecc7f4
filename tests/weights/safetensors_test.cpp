// The safetensors reader and writer: a round trip keeps every tensor, dtype, shape and the
// metadata, in a layout the format's reference reader accepts; every corrupt file (written for
// real) is an Error SY302 naming the file and the tensor or field, never a crash or a read
// past the end; and importer weight names map to Hugging Face checkpoint names.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/importer/importer.hpp"
#include "core/weights/weights.hpp"
#include "support/little_endian.hpp"
#include "support/test_paths.hpp"

namespace sy {
namespace {

namespace fs = std::filesystem;
using test::TempDir;
using ::testing::HasSubstr;

using test::kExamplesDir;

TensorInfo info(const std::string& name, sy_dtype dtype, std::vector<int64_t> shape) {
  TensorInfo t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  uint64_t n = 1;
  for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
  t.bytes = n * sy_dtype_size(dtype);
  return t;
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

using test::le64;

// A safetensors file from a header text and `data_bytes` bytes of data.
std::string file_bytes(const std::string& header, size_t data_bytes) {
  return le64(header.size()) + header + std::string(data_bytes, '\x5a');
}

// Opening `path` throws Error SY302 at `path` whose message contains every `needle`.
void expect_bad(const fs::path& path, const std::vector<std::string>& needles) {
  try {
    SafetensorsFile::open(path.string());
    ADD_FAILURE() << path << " opened, expected SY302 with '" << needles.front() << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code, Errc::bad_weights) << e.what();
    EXPECT_EQ(e.where, path.string());
    std::string msg = e.what();
    EXPECT_NE(msg.find(path.string()), std::string::npos) << msg;
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << n << " | " << msg;
  }
}

// A header with one tensor entry `entry` (a JSON object text) and `data_bytes` of data.
void expect_bad_entry(const TempDir& dir, const std::string& entry, size_t data_bytes,
                      const std::vector<std::string>& needles) {
  static int counter = 0;
  fs::path p = dir.path() / (std::to_string(counter++) + ".safetensors");
  write_bytes(p, file_bytes("{\"w\":" + entry + "}", data_bytes));
  SCOPED_TRACE(entry);
  expect_bad(p, needles);
}

TEST(Safetensors, RoundTripKeepsTensorsMetadataAndAlignment) {
  TempDir dir;
  fs::path path = dir.path() / "model.safetensors";
  std::vector<float> f32 = {1.5f, -2.0f, 3.25f, 0.0f, 1e-7f, -1e30f};
  std::vector<uint16_t> bf16 = {0x3f80, 0xbf80, 0x4000, 0x7f80, 0x0001};  // 10 bytes: odd size
  std::vector<int64_t> i64 = {-1, 0, int64_t{1} << 40};
  std::vector<uint16_t> f16 = {0x3c00, 0xc000, 0x7bff};  // 6 bytes
  std::vector<int32_t> i32 = {7};                        // 4 bytes
  std::vector<std::pair<TensorInfo, const void*>> tensors = {
      {info("model.layers.0.self_attn.q_proj.weight", SY_DTYPE_BF16, {5}), bf16.data()},
      {info("f16", SY_DTYPE_F16, {1, 3}), f16.data()},
      {info("model.embed_tokens.weight", SY_DTYPE_F32, {2, 3}), f32.data()},
      {info("i32", SY_DTYPE_I32, {1}), i32.data()},
      {info("positions", SY_DTYPE_I64, {3}), i64.data()},
      {info("empty", SY_DTYPE_F32, {0, 4}), nullptr},
      {info("scalar", SY_DTYPE_F32, {}), f32.data()},
  };
  std::map<std::string, std::string> meta = {{"format", "pt"}, {"note", "ünïcode \"quoted\""}};
  write_safetensors(path.string(), tensors, meta);

  // Nothing but the file is left in the folder (the temporary file was renamed).
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);

  SafetensorsFile f = SafetensorsFile::open(path.string());
  EXPECT_EQ(f.metadata(), meta);
  ASSERT_EQ(f.tensors().size(), tensors.size());
  for (const auto& [want, data] : tensors) {
    const TensorInfo* got = f.find(want.name);
    ASSERT_NE(got, nullptr) << want.name;
    EXPECT_EQ(got->name, want.name);
    EXPECT_EQ(got->dtype, want.dtype) << want.name;
    EXPECT_EQ(got->shape, want.shape) << want.name;
    EXPECT_EQ(got->bytes, want.bytes) << want.name;
    EXPECT_EQ(got->offset % sy_dtype_size(want.dtype), 0u) << want.name;
    if (want.bytes % 8 == 0) {
      EXPECT_EQ(got->offset % 8, 0u) << want.name;
    }
    if (want.bytes > 0) {
      EXPECT_EQ(std::memcmp(f.data(*got), data, want.bytes), 0) << want.name;
    }
  }
  EXPECT_EQ(f.find("missing"), nullptr);
  EXPECT_EQ(f.find("__metadata__"), nullptr);

  // The layout the reference reader requires: the data section starts 8-byte aligned, tensors
  // (in data order) are back to back from its start and the last one ends the file.
  std::string raw = test::file_contents(path);
  uint64_t header_len = 0;
  std::memcpy(&header_len, raw.data(), 8);  // little-endian host
  EXPECT_EQ((8 + header_len) % 8, 0u);
  uint64_t pos = 8 + header_len;
  for (const TensorInfo& t : f.tensors()) {
    EXPECT_EQ(t.offset, pos) << t.name;
    pos += t.bytes;
  }
  EXPECT_EQ(pos, raw.size());
  EXPECT_EQ(f.size(), raw.size());

  // Moving keeps the mapping and the TensorInfo pointers valid.
  const TensorInfo* q = f.find("model.layers.0.self_attn.q_proj.weight");
  const void* q_data = f.data(*q);
  SafetensorsFile moved = std::move(f);
  EXPECT_EQ(moved.find("model.layers.0.self_attn.q_proj.weight"), q);
  EXPECT_EQ(moved.data(*q), q_data);
  EXPECT_EQ(std::memcmp(moved.data(*q), bf16.data(), 10), 0);
  SafetensorsFile other = SafetensorsFile::open(path.string());
  other = std::move(moved);
  EXPECT_EQ(other.find("positions")->bytes, 24u);
  EXPECT_EQ(static_cast<const int64_t*>(other.data(*other.find("positions")))[2], i64[2]);

  // A TensorInfo that does not lie within the file is refused, not read.
  TensorInfo outside = *other.find("positions");
  outside.offset = other.size() - 4;
  EXPECT_THROW(other.data(outside), std::out_of_range);
}

TEST(Safetensors, NoMetadataAndEmptyFile) {
  TempDir dir;
  fs::path path = dir.path() / "empty.safetensors";
  write_safetensors(path.string(), {});
  SafetensorsFile f = SafetensorsFile::open(path.string());
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_TRUE(f.metadata().empty());
  EXPECT_EQ(test::file_contents(path).find("__metadata__"), std::string::npos);
}

TEST(Safetensors, WriteReplacesAtomicallyAndRejectsBadArguments) {
  TempDir dir;
  fs::path path = dir.path() / "w.safetensors";
  std::vector<float> a = {1, 2, 3, 4};
  write_safetensors(path.string(), {{info("a", SY_DTYPE_F32, {4}), a.data()}});
  std::vector<int32_t> b = {9, 8};
  write_safetensors(path.string(), {{info("b", SY_DTYPE_I32, {2}), b.data()}});
  {
    SafetensorsFile f = SafetensorsFile::open(path.string());
    EXPECT_EQ(f.find("a"), nullptr);
    ASSERT_NE(f.find("b"), nullptr);
    EXPECT_EQ(static_cast<const int32_t*>(f.data(*f.find("b")))[1], 8);
  }
  std::string before = test::file_contents(path);

  TensorInfo wrong_bytes = info("a", SY_DTYPE_F32, {4});
  wrong_bytes.bytes = 12;
  TensorInfo f64 = info("d", SY_DTYPE_F64, {1});
  TensorInfo negative = info("n", SY_DTYPE_F32, {1});
  negative.shape = {-1};
  for (const auto& bad : std::vector<std::vector<std::pair<TensorInfo, const void*>>>{
           {{wrong_bytes, a.data()}},
           {{f64, a.data()}},
           {{negative, a.data()}},
           {{info("a", SY_DTYPE_F32, {4}), nullptr}},
           {{info("__metadata__", SY_DTYPE_F32, {1}), a.data()}},
           {{info("x", SY_DTYPE_F32, {1}), a.data()}, {info("x", SY_DTYPE_F32, {1}), a.data()}},
           {{info("bad\xff utf8", SY_DTYPE_F32, {1}), a.data()}}}) {
    EXPECT_THROW(write_safetensors(path.string(), bad), std::invalid_argument)
        << bad.front().first.name;
  }
  EXPECT_THROW(write_safetensors((dir.path() / "no" / "such" / "dir.safetensors").string(),
                                 {{info("a", SY_DTYPE_F32, {4}), a.data()}}),
               std::runtime_error);
  // The failed writes left the old file and no temporary files.
  EXPECT_EQ(test::file_contents(path), before);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
}

TEST(Safetensors, TooShortMissingOrNotAFile) {
  TempDir dir;
  write_bytes(dir.path() / "zero", "");
  expect_bad(dir.path() / "zero", {"0 bytes", "shorter than the 8-byte header length"});
  write_bytes(dir.path() / "five", std::string("\x10\0\0\0\0", 5));
  expect_bad(dir.path() / "five", {"5 bytes", "shorter"});
  expect_bad(dir.path() / "absent.safetensors", {"cannot open", "No such file"});
  expect_bad(dir.path(), {"not a regular file"});
}

TEST(Safetensors, HeaderLengthPastTheFileOrTooLarge) {
  TempDir dir;
  fs::path good = dir.path() / "good.safetensors";
  std::vector<float> a(16, 1.0f);
  write_safetensors(good.string(), {{info("a", SY_DTYPE_F32, {16}), a.data()}});
  std::string raw = test::file_contents(good);
  uint64_t header_len = 0;
  std::memcpy(&header_len, raw.data(), 8);

  // Truncated inside the header.
  write_bytes(dir.path() / "cut_header", raw.substr(0, 8 + header_len - 3));
  expect_bad(dir.path() / "cut_header", {"header length " + std::to_string(header_len),
                                         "larger than the " + std::to_string(header_len - 3)});
  // Truncated inside the data: the tensor reaches past the data section.
  write_bytes(dir.path() / "cut_data", raw.substr(0, raw.size() - 1));
  expect_bad(dir.path() / "cut_data",
             {"tensor 'a'", "data_offsets [0, 64)", "past the end", "(63 bytes)"});
  // Header length flipped to huge values.
  for (uint64_t flipped : {~uint64_t{0}, uint64_t{1} << 63, header_len + 1000}) {
    std::string bytes = le64(flipped) + raw.substr(8);
    write_bytes(dir.path() / "flipped", bytes);
    expect_bad(dir.path() / "flipped", {"header length " + std::to_string(flipped), "larger"});
  }
  // A header length above 100 MiB in a (sparse) file large enough to hold it.
  fs::path huge = dir.path() / "huge.safetensors";
  uint64_t len = kSafetensorsMaxHeader + 1;
  write_bytes(huge, le64(len) + "{}");
  fs::resize_file(huge, 8 + len + 8);
  expect_bad(huge, {"header length " + std::to_string(len), "exceeds the limit", "100 MiB"});
}

TEST(Safetensors, HeaderNotJsonOrNotAnObject) {
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"w\": {\"dtype\": \"F32\"", "not valid JSON"},
      {"not json at all", "not valid JSON"},
      {"", "not valid JSON"},
      {"{\"w\": 1e999}", "not valid JSON"},
      {std::string("{\"\xff\": 1}"), "not valid JSON"},
      {"[1, 2, 3]", "header is a JSON array, not an object"},
      {"\"text\"", "header is a JSON string, not an object"},
      {"{\"__metadata__\": [\"a\"]}", "\"__metadata__\" is a JSON array"},
      {"{\"__metadata__\": {\"format\": \"pt\", \"n\": 3}}",
       "\"__metadata__\" entry 'n' is a JSON number, not a string"},
  };
  int i = 0;
  for (const auto& [header, needle] : cases) {
    fs::path p = dir.path() / (std::string("h") += std::to_string(i++));
    write_bytes(p, file_bytes(header, 0));
    SCOPED_TRACE(header);
    expect_bad(p, {needle});
  }
}

TEST(Safetensors, EntryFieldsMissingOrMistyped) {
  TempDir dir;
  const std::string t = "tensor 'w'";
  expect_bad_entry(dir, "[1]", 0, {t, "entry is not a JSON object"});
  expect_bad_entry(dir, R"({"shape":[1],"data_offsets":[0,4]})", 4, {t, "missing field \"dtype\""});
  expect_bad_entry(dir, R"({"dtype":"F32","data_offsets":[0,4]})", 4,
                   {t, "missing field \"shape\""});
  expect_bad_entry(dir, R"({"dtype":"F32","shape":[1]})", 4, {t, "missing field \"data_offsets\""});
  expect_bad_entry(dir, R"({"dtype":4,"shape":[1],"data_offsets":[0,4]})", 4,
                   {t, "\"dtype\" is not a string"});
  expect_bad_entry(dir, R"({"dtype":"F32","shape":"1","data_offsets":[0,4]})", 4,
                   {t, "\"shape\" is not an array"});
  expect_bad_entry(dir, R"({"dtype":"F32","shape":[1.5],"data_offsets":[0,4]})", 4,
                   {t, "shape[0] is not an integer"});
  expect_bad_entry(dir, R"({"dtype":"F32","shape":[1],"data_offsets":[0]})", 4,
                   {t, "\"data_offsets\" is not an array of two integers"});
  expect_bad_entry(dir, R"({"dtype":"F32","shape":[1],"data_offsets":{"a":0}})", 4,
                   {t, "\"data_offsets\" is not an array of two integers"});
  expect_bad_entry(dir, R"({"dtype":"F32","shape":[1],"data_offsets":[-4,0]})", 4,
                   {t, "\"data_offsets\" holds -4, not an unsigned integer"});
  expect_bad_entry(dir, R"({"dtype":"F32","shape":[1],"data_offsets":[0,"4"]})", 4,
                   {t, "not an unsigned integer"});
}

TEST(Safetensors, UnknownDtypeIsNamed) {
  TempDir dir;
  for (const char* dtype : {"F8_E4M3", "F64", "BOOL", "U16", "f32", ""}) {
    expect_bad_entry(
        dir, std::string(R"({"dtype":")") + dtype + R"(","shape":[1],"data_offsets":[0,8]})", 8,
        {"tensor 'w'", std::string("unsupported dtype '") + dtype + "'",
         "F32, BF16, F16, I64, I32, U8"});
  }
}

TEST(Safetensors, NegativeOrOverflowingShape) {
  TempDir dir;
  expect_bad_entry(dir, R"({"dtype":"F32","shape":[4,-1],"data_offsets":[0,0]})", 0,
                   {"tensor 'w'", "shape[1] = -1 is negative"});
  // Elements overflow: 2^32 * 2^32.
  expect_bad_entry(dir, R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]})",
                   16, {"tensor 'w'", "overflows"});
  // Elements fit, bytes do not: 2^62 F32 elements.
  expect_bad_entry(dir, R"({"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,16]})",
                   16, {"tensor 'w'", "overflows"});
  // A dimension above INT64_MAX (2^63).
  expect_bad_entry(dir, R"({"dtype":"I64","shape":[9223372036854775808],"data_offsets":[0,8]})", 8,
                   {"tensor 'w'", "shape[0] = 9223372036854775808 is too large"});
  // Huge, but multiplying to exactly what the offsets hold would need 2^40 bytes of data.
  expect_bad_entry(dir, R"({"dtype":"BF16","shape":[1048576,1048576],"data_offsets":[0,8]})", 8,
                   {"tensor 'w'", "data_offsets [0, 8) hold 8 bytes", "needs 2199023255552"});
  // A zero dimension is a legal empty tensor.
  fs::path p = dir.path() / "zero_dim.safetensors";
  write_bytes(p, file_bytes(R"({"w":{"dtype":"F32","shape":[0,5],"data_offsets":[0,0]}})", 0));
  SafetensorsFile f = SafetensorsFile::open(p.string());
  ASSERT_NE(f.find("w"), nullptr);
  EXPECT_EQ(f.find("w")->bytes, 0u);
}

TEST(Safetensors, DataOffsetsOutsideOrWrongSize) {
  TempDir dir;
  const std::string t = "tensor 'w'";
  expect_bad_entry(dir, R"({"dtype":"F32","shape":[1],"data_offsets":[8,4]})", 16,
                   {t, "data_offsets [8, 4)", "ends before it begins"});
  expect_bad_entry(dir, R"({"dtype":"F32","shape":[4],"data_offsets":[8,24]})", 16,
                   {t, "data_offsets [8, 24)", "past the end of the data section (16 bytes)"});
  expect_bad_entry(
      dir,
      R"({"dtype":"F32","shape":[1],"data_offsets":[18446744073709551612,18446744073709551615]})",
      16, {t, "past the end"});
  expect_bad_entry(dir, R"({"dtype":"F32","shape":[2,2],"data_offsets":[0,12]})", 16,
                   {t, "data_offsets [0, 12) hold 12 bytes", "F32 shape [2, 2] needs 16"});
  expect_bad_entry(dir, R"({"dtype":"I64","shape":[1],"data_offsets":[0,16]})", 16,
                   {t, "hold 16 bytes", "needs 8"});
}

TEST(Safetensors, OverlappingTensors) {
  TempDir dir;
  fs::path p = dir.path() / "overlap.safetensors";
  write_bytes(p, file_bytes(R"({"b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]},)"
                            R"("a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
                            24));
  expect_bad(p, {"tensors 'a' and 'b' overlap", "[0, 16)", "[8, 24)"});
  // Contained in a larger tensor that is not the one just before it.
  write_bytes(p, file_bytes(R"({"big":{"dtype":"F32","shape":[8],"data_offsets":[0,32]},)"
                            R"("x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},)"
                            R"("y":{"dtype":"F32","shape":[1],"data_offsets":[20,24]}})",
                            32));
  expect_bad(p, {"tensors 'big' and 'x' overlap"});
  // The same range twice.
  write_bytes(p, file_bytes(R"({"p":{"dtype":"I32","shape":[2],"data_offsets":[0,8]},)"
                            R"("q":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                            8));
  expect_bad(p, {"tensors 'p' and 'q' overlap"});
  // Adjacent, gaps and empty tensors at a shared offset are fine.
  write_bytes(p, file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                            R"("e1":{"dtype":"F32","shape":[0],"data_offsets":[8,8]},)"
                            R"("e2":{"dtype":"BF16","shape":[0],"data_offsets":[8,8]},)"
                            R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},)"
                            R"("c":{"dtype":"F16","shape":[2],"data_offsets":[20,24]}})",
                            24));
  SafetensorsFile f = SafetensorsFile::open(p.string());
  EXPECT_EQ(f.tensors().size(), 5u);
}

TEST(Safetensors, HfTensorNames) {
  const std::vector<std::pair<std::string, std::string>> common = {
      {"embed_tokens", "model.embed_tokens.weight"},
      {"norm", "model.norm.weight"},
      {"lm_head", "lm_head.weight"},
      {"l3.q_proj", "model.layers.3.self_attn.q_proj.weight"},
      {"l3.k_proj", "model.layers.3.self_attn.k_proj.weight"},
      {"l3.v_proj", "model.layers.3.self_attn.v_proj.weight"},
      {"l3.o_proj", "model.layers.3.self_attn.o_proj.weight"},
      {"l3.input_layernorm", "model.layers.3.input_layernorm.weight"},
      {"l3.post_attention_layernorm", "model.layers.3.post_attention_layernorm.weight"},
      {"l3.gate_proj", "model.layers.3.mlp.gate_proj.weight"},
      {"l3.up_proj", "model.layers.3.mlp.up_proj.weight"},
      {"l3.down_proj", "model.layers.3.mlp.down_proj.weight"},
      {"l0.q_proj_bias", "model.layers.0.self_attn.q_proj.bias"},
      {"l0.o_proj_bias", "model.layers.0.self_attn.o_proj.bias"},
      {"l12.gate_proj_bias", "model.layers.12.mlp.gate_proj.bias"},
      {"l35.down_proj", "model.layers.35.mlp.down_proj.weight"},
  };
  for (const char* type :
       {"llama", "mistral", "qwen2", "qwen3", "smollm3", "gemma2", "gemma3_text"})
    for (const auto& [value, name] : common)
      EXPECT_EQ(hf_tensor_name(type, value), name) << type << " " << value;

  EXPECT_EQ(hf_tensor_name("qwen3", "l3.q_norm"), "model.layers.3.self_attn.q_norm.weight");
  EXPECT_EQ(hf_tensor_name("qwen3", "l3.k_norm"), "model.layers.3.self_attn.k_norm.weight");
  EXPECT_EQ(hf_tensor_name("llama", "l3.q_norm"), std::nullopt);
  EXPECT_EQ(hf_tensor_name("smollm3", "l3.k_norm"), std::nullopt);
  EXPECT_EQ(hf_tensor_name("qwen3", "l3.pre_feedforward_layernorm"), std::nullopt);

  EXPECT_EQ(hf_tensor_name("gemma2", "l2.post_feedforward_layernorm"),
            "model.layers.2.post_feedforward_layernorm.weight");
  EXPECT_EQ(hf_tensor_name("gemma2", "l2.q_norm"), std::nullopt);
  EXPECT_EQ(hf_tensor_name("qwen2", "l2.pre_feedforward_layernorm"), std::nullopt);
  EXPECT_EQ(hf_tensor_name("gemma3_text", "l2.pre_feedforward_layernorm"),
            "model.layers.2.pre_feedforward_layernorm.weight");
  EXPECT_EQ(hf_tensor_name("gemma3_text", "l2.q_norm"), "model.layers.2.self_attn.q_norm.weight");
  EXPECT_EQ(hf_tensor_name("gemma3", "embed_tokens"), "language_model.model.embed_tokens.weight");
  EXPECT_EQ(hf_tensor_name("gemma3", "l1.post_feedforward_layernorm"),
            "language_model.model.layers.1.post_feedforward_layernorm.weight");
  EXPECT_EQ(hf_tensor_name("gemma3", "lm_head"), "language_model.lm_head.weight");

  for (const char* value : {"embed_scale",
                            "tokens",
                            "positions",
                            "logits",
                            "l3.k_cache",
                            "l3.q",
                            "l3.attn_norm",
                            "l3.sinks",
                            "l3.router",
                            "l3.q_proj.weight",
                            "l3.",
                            "l.q_proj",
                            "lx.q_proj",
                            "l03.q_proj",
                            "l-1.q_proj",
                            "l+1.q_proj",
                            "l1234567890.q_proj",
                            "L3.q_proj",
                            "3.q_proj",
                            "",
                            "l",
                            "l3.norm_bias",
                            "l3._bias",
                            "model.embed_tokens.weight"})
    EXPECT_EQ(hf_tensor_name("llama", value), std::nullopt) << value;
  for (const char* type : {"mamba", "", "Llama"})
    EXPECT_EQ(hf_tensor_name(type, "embed_tokens"), std::nullopt) << type;
  // gpt-oss: llama's names, its sinks and router; its stacked experts are read_hf_experts'.
  EXPECT_EQ(hf_tensor_name("gpt_oss", "l2.sinks"), "model.layers.2.self_attn.sinks");
  EXPECT_EQ(hf_tensor_name("gpt_oss", "l2.router"), "model.layers.2.mlp.router.weight");
  EXPECT_EQ(hf_tensor_name("gpt_oss", "l2.router_bias"), "model.layers.2.mlp.router.bias");
  EXPECT_EQ(hf_tensor_name("gpt_oss", "l2.o_proj_bias"), "model.layers.2.self_attn.o_proj.bias");
  EXPECT_EQ(hf_tensor_name("gpt_oss", "l2.experts.gate_proj"), std::nullopt);
}

// gpt-oss's experts: gate/up de-interleaved from gate_up_proj [E, H, 2I] and transposed, down
// transposed, biases split; mxfp4 blocks repacked from transformers' nibble order (2j low,
// 2j + 1 high) into GGUF's (j low, j + 16 high); a NaN scale and a wrong shape refused by name.
TEST(Safetensors, GptOssExpertsAreReadIntoTheGraphsLayout) {
  TempDir dir;
  const int64_t E = 2, H = 32, I = 32;
  std::vector<float> gate_up(size_t(E * H * 2 * I)), down(size_t(E * I * H)),
      bias(size_t(E * 2 * I));
  for (size_t i = 0; i < gate_up.size(); ++i) gate_up[i] = float(i);
  for (size_t i = 0; i < down.size(); ++i) down[i] = float(i) + 0.5f;
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = -float(i);
  std::vector<uint8_t> blocks(size_t(E * 2 * I * 16)), scales(size_t(E * 2 * I), 127);
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = uint8_t(i * 37 + 11);
  const std::string base = "model.layers.0.mlp.experts.";
  const fs::path path = dir.path() / "experts.safetensors";
  write_safetensors(
      path.string(),
      {{info(base + "gate_up_proj", SY_DTYPE_F32, {E, H, 2 * I}), gate_up.data()},
       {info(base + "down_proj", SY_DTYPE_F32, {E, I, H}), down.data()},
       {info(base + "gate_up_proj_bias", SY_DTYPE_F32, {E, 2 * I}), bias.data()},
       {info(base + "gate_up_proj_blocks", SY_DTYPE_U8, {E, 2 * I, 1, 16}), blocks.data()},
       {info(base + "gate_up_proj_scales", SY_DTYPE_U8, {E, 2 * I, 1}), scales.data()}});
  SafetensorsFile f = SafetensorsFile::open(path.string());
  std::string error;
  std::vector<float> out(size_t(E * I * H));
  ASSERT_TRUE(read_hf_experts(f, "l0.experts.up_proj", SY_DTYPE_F32, {E, I, H}, out.data(), error));
  ASSERT_EQ(error, "");
  // up[e][n][k] = gate_up[e][k][2n + 1]
  EXPECT_EQ(out[size_t((1 * I + 3) * H + 5)], gate_up[size_t((1 * H + 5) * 2 * I + 7)]);
  ASSERT_TRUE(
      read_hf_experts(f, "l0.experts.down_proj", SY_DTYPE_F32, {E, H, I}, out.data(), error));
  EXPECT_EQ(out[size_t((1 * H + 3) * I + 5)], down[size_t((1 * I + 5) * H + 3)]);  // transposed
  std::vector<float> b(size_t(E * I));
  ASSERT_TRUE(
      read_hf_experts(f, "l0.experts.gate_proj_bias", SY_DTYPE_F32, {E, I}, b.data(), error));
  EXPECT_EQ(b[size_t(1 * I + 4)], bias[size_t(1 * 2 * I + 8)]);

  std::vector<uint8_t> q(size_t(E * I * 17));
  ASSERT_TRUE(
      read_hf_experts(f, "l0.experts.gate_proj", SY_DTYPE_MXFP4, {E, I, H}, q.data(), error));
  ASSERT_EQ(error, "");
  const uint8_t* hf = blocks.data() + (1 * 2 * I + 2 * 3) * 16;  // expert 1, gate row 3
  const uint8_t* ours = q.data() + (1 * I + 3) * 17;
  EXPECT_EQ(ours[0], 127);
  auto hf_element = [hf](int i) { return (hf[i / 2] >> (4 * (i % 2))) & 15; };
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(ours[1 + i] & 15, hf_element(i)) << i;
    EXPECT_EQ(ours[1 + i] >> 4, hf_element(i + 16)) << i;
  }
  EXPECT_FALSE(read_hf_experts(f, "l0.router", SY_DTYPE_F32, {E, H}, out.data(), error));

  ASSERT_TRUE(read_hf_experts(f, "l0.experts.gate_proj", SY_DTYPE_F32, {E, 2 * I, H}, out.data(),
                              error));  // the config disagrees with the file
  EXPECT_THAT(error, HasSubstr("gate_up_proj' has shape [2, 32, 64]"));
  error.clear();
  ASSERT_TRUE(
      read_hf_experts(f, "l1.experts.gate_proj", SY_DTYPE_F32, {E, I, H}, out.data(), error));
  EXPECT_THAT(error, HasSubstr("model.layers.1.mlp.experts.gate_up_proj' is missing"));
  error.clear();
  ASSERT_TRUE(
      read_hf_experts(f, "l0.experts.down_proj", SY_DTYPE_MXFP4, {E, H, I}, q.data(), error));
  EXPECT_THAT(error, HasSubstr("down_proj_blocks' is missing"));

  scales[5] = 0xFF;
  const fs::path nan = dir.path() / "nan.safetensors";
  write_safetensors(
      nan.string(),
      {{info(base + "gate_up_proj_blocks", SY_DTYPE_U8, {E, 2 * I, 1, 16}), blocks.data()},
       {info(base + "gate_up_proj_scales", SY_DTYPE_U8, {E, 2 * I, 1}), scales.data()}});
  SafetensorsFile g = SafetensorsFile::open(nan.string());
  error.clear();
  ASSERT_TRUE(read_hf_experts(g, "l0.experts.up_proj", SY_DTYPE_MXFP4, {E, I, H}, q.data(), error));
  EXPECT_THAT(error, HasSubstr("gate_up_proj_scales' holds the E8M0 scale 0xFF (NaN) at [0,5,0]"));
}

// Every weight the importer declares for the example configs has a checkpoint name, and no two
// share one.
TEST(Safetensors, HfTensorNamesCoverImportedGraphs) {
  for (const char* model : {"llama-3.2-1b", "qwen3-0.6b", "smollm3-3b", "gemma-3-1b",
                            "qwen2.5-0.5b", "mistral-7b-v0.1", "gemma-2-2b-it"}) {
    fs::path config = kExamplesDir / "models" / model / "config.json";
    ImportOptions small;
    small.max_batch_tokens = 4;
    small.context = 8;
    Graph g = import_hf_config(config.string(), small);
    std::string type = nlohmann::json::parse(test::file_contents(config)).value("model_type", "");
    std::map<std::string, std::string> seen;
    for (const Phase& p : g.phases)
      for (const Value& v : p.values) {
        if (v.kind != ValueKind::weight) continue;
        auto name = hf_tensor_name(type, v.name);
        ASSERT_TRUE(name.has_value()) << model << " " << v.name;
        auto [it, fresh] = seen.emplace(*name, v.name);
        EXPECT_TRUE(fresh || it->second == v.name) << *name << " for " << v.name;
      }
    EXPECT_FALSE(seen.empty()) << model;
  }
}

}  // namespace
}  // namespace sy
