// GGUF files as models (core/gguf_model/): a file written the way llama.cpp's converter writes a
// llama checkpoint — llama.* hyper-parameters, a byte-level BPE tokenizer, tensors in GGUF order,
// attn_q / attn_k rows permuted for the interleaved rope — describes the same config, tokenizer
// and generation settings, and runs to the same logits as the double reference
// (support/llama_reference.hpp) fed the values the file holds: f32, f16, and Q8_0 / Q4_1
// matrices (quantized by the test's own GGUF quantizer, a tied head from a quantized embedding),
// on every CPU tier. Every metadata key is honoured or refused by name.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/errors/error.hpp"
#include "core/gguf_model/gguf_model.hpp"
#include "core/importer/importer.hpp"
#include "support/cpu_tiers.hpp"
#include "support/llama_reference.hpp"
#include "support/sequence_runner.hpp"
#include "support/test_paths.hpp"
#include "support/tiny_gguf.hpp"

namespace sy {
namespace {

using test::GgufWriter;
using test::kShape;
using test::Storage;
using test::TinyGguf;
constexpr int64_t kGgufContext = 24;

struct Parsed {
  std::string bytes;
  GgufFile file;
  explicit Parsed(std::string b)
      : bytes(std::move(b)),
        file(GgufFile::parse(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
                             "tiny.gguf")) {}
};

TEST(GgufModel, DescribesTheConfigItsMetadataStandsFor) {
  Parsed f(TinyGguf(Storage::quantized).w.bytes());
  const GgufModel m = describe_gguf(f.file);
  nlohmann::json want = kShape.config();
  want["tie_word_embeddings"] = true;  // no output.weight
  for (const auto& [key, value] : want.items()) {
    if (value.is_number_float())  // GGUF stores f32
      EXPECT_FLOAT_EQ(m.config.at(key).get<float>(), value.get<float>()) << key;
    else
      EXPECT_EQ(m.config.at(key), value) << key << ": " << m.config.dump();
  }
  EXPECT_EQ(m.weight_dtypes.at("l1.q_proj"), SY_DTYPE_Q8_0);
  EXPECT_EQ(m.weight_dtypes.at("l0.down_proj"), SY_DTYPE_Q4_1);
  EXPECT_EQ(m.weight_dtypes.at("embed_tokens"), SY_DTYPE_Q4_1);
  EXPECT_EQ(m.weight_dtypes.count("l0.input_layernorm"), 0u);
  EXPECT_EQ(m.weight_dtypes.count("lm_head"), 0u);  // tied: the importer reuses embed_tokens
}

// 16-bit float files: F16 computes in f32 (never rounded to bf16) and the plan's conventions
// say so; quantized and f32 files state nothing (their activations are f32 as ever).
TEST(GgufModel, AnF16FileStaysF32AndSaysSo) {
  Parsed f16(TinyGguf(Storage::f16).w.bytes());
  const GgufModel m = describe_gguf(f16.file);
  EXPECT_EQ(m.config.at("torch_dtype"), "float32");
  bool stated = false;
  for (const std::string& c : m.conventions)
    stated |= c.find("activations f32: the file's projection weights are F16") != std::string::npos;
  EXPECT_TRUE(stated);
  for (Storage s : {Storage::f32, Storage::quantized}) {
    Parsed other(TinyGguf(s).w.bytes());
    const GgufModel o = describe_gguf(other.file);
    EXPECT_EQ(o.config.at("torch_dtype"), "float32");
    for (const std::string& c : o.conventions) EXPECT_EQ(c.find("activations"), std::string::npos);
  }
}

TEST(GgufModel, TokenizerAndGenerationSettingsComeFromTheTokenizerKeys) {
  Parsed f(TinyGguf(Storage::f32).w.bytes());
  const Tokenizer tok = Tokenizer::parse(gguf_tokenizer_json(f.file), "tiny.gguf");
  // "hello the": 'h e' merges first, then 'Ġ t' and 'Ġt he' (the merges' order is their rank).
  const std::vector<int64_t> ids = {98, test::token_id_of('l'), test::token_id_of('l'),
                                    test::token_id_of('o'), 100};
  EXPECT_EQ(tok.encode("hello the"), ids);
  EXPECT_EQ(tok.decode(ids), "hello the");
  EXPECT_EQ(tok.encode("<|im_end|>"), std::vector<int64_t>{2});  // a control token is special
  const GenerationSettings g = gguf_generation_settings(f.file, tok);
  EXPECT_EQ(g.eos_ids, std::vector<int64_t>{2});
  EXPECT_TRUE(g.prompt_prefix.empty());  // add_bos_token false
  ASSERT_TRUE(g.chat_template.has_value());
  EXPECT_EQ(g.chat_template_origin, "tiny.gguf:tokenizer.chat_template");
  EXPECT_EQ(g.special_tokens.at("eos_token"), "<|im_end|>");
}

// tokenizer.ggml.pre names the pre-tokenizer of the tokenizer.json a file was converted from
// (llama.cpp's names): the fixture tokenizers, written into a GGUF's tokenizer keys under the
// name llama.cpp's converter gives their pattern, tokenize as the tokenizer.json itself does
// (which TokenizerO200kStyle and the others hold to PyPI `tokenizers`).
TEST(GgufModel, PreNamesGiveTheirTokenizersSplits) {
  const std::vector<std::string> texts = {
      "Hello world\n\nSecond line\r\n  indented\tand tabbed   ", "1234567890 and 3.14159, 07:15",
      "I'm DON'T they'll WE'VE naïve café 東京 🙂",
      "CamelCaseWords, SCREAMING_CASE and path/to/file.txt <|endoftext|>"};
  for (auto [file, pre] :
       {std::pair{"o200k_style.json", "gpt-4o"}, std::pair{"llama3_style.json", "llama-bpe"},
        std::pair{"smollm_style.json", "smollm"}, std::pair{"gpt2_style.json", "gpt2"}}) {
    SCOPED_TRACE(pre);
    const std::string path = std::string(SY_TEST_FIXTURES_DIR) + "/tokenizer/" + file;
    const Tokenizer want = Tokenizer::load(path);
    std::ifstream in(path);
    const nlohmann::json j = nlohmann::json::parse(in);
    std::vector<std::string> tokens(size_t(want.vocab_size()));
    std::vector<int32_t> types(tokens.size(), 1);
    for (const auto& [text, id] : j["model"]["vocab"].items()) tokens[id.get<size_t>()] = text;
    for (const auto& a : j["added_tokens"]) {
      tokens[a["id"].get<size_t>()] = a["content"];
      types[a["id"].get<size_t>()] = a["special"].get<bool>() ? 3 : 4;
    }
    std::vector<std::string> merges;
    for (const auto& m : j["model"]["merges"])
      merges.push_back(m.is_string() ? m.get<std::string>()
                                     : m[0].get<std::string>() + " " + m[1].get<std::string>());
    TinyGguf t(Storage::f32);
    t.w.string("tokenizer.ggml.pre", pre);
    t.w.strings("tokenizer.ggml.tokens", tokens).i32s("tokenizer.ggml.token_type", types);
    t.w.strings("tokenizer.ggml.merges", merges);
    t.w.erase("tokenizer.chat_template").erase("tokenizer.ggml.bos_token_id");
    t.w.erase("tokenizer.ggml.eos_token_id");
    Parsed f(t.w.bytes());
    const Tokenizer got = Tokenizer::parse(gguf_tokenizer_json(f.file), "tiny.gguf");
    for (const std::string& text : texts) EXPECT_EQ(got.encode(text), want.encode(text)) << text;
  }
}

// SentencePiece vocabularies (tokenizer.ggml.model = "llama"), as llama.cpp's converter writes
// them (no merges; scores; token types), read as transformers' own GGUF loader reads them: the
// expected ids and texts came from it (tests/fixtures/tokenizer/make_gguf_spm.py). The Llama
// file derives its merges from the scores and puts a prefix space before the text; the Gemma
// file derives them from the tokens' order, spells its tokens of spaces with spaces and adds no
// prefix space. Also the vocabularies llama.cpp's converter wrote into the *_converted parity
// fixtures (SentencePiece for mistral and the Gemmas, byte-level BPE with the family's `pre` for
// smollm3, qwen3moe and gpt-oss). Both ways in: the document a model loads
// (Tokenizer::from_document, as `switchyard run` reads the file) and its text.
TEST(GgufModel, SentencePieceVocabulariesTokenizeAsTransformersLoadsThem) {
  const std::string dir = std::string(SY_TEST_FIXTURES_DIR) + "/tokenizer/";
  std::ifstream in(dir + "gguf_spm_cases.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  ASSERT_EQ(j["cases"].size(), 8u);  // two of our writer's, six of llama.cpp's converter's
  for (const auto& c : j["cases"]) {
    SCOPED_TRACE(c["file"].get<std::string>());
    const GgufFile f = GgufFile::open(dir + c["file"].get<std::string>());
    const Tokenizer from_document = Tokenizer::from_document(gguf_tokenizer_document(f), f.path());
    const Tokenizer from_text = Tokenizer::parse(gguf_tokenizer_json(f), f.path());
    for (const Tokenizer* tok : {&from_document, &from_text})
      for (size_t i = 0; i < j["corpus"].size(); ++i) {
        const std::string text = j["corpus"][i];
        const std::vector<int64_t> ids = tok->encode(text);
        EXPECT_EQ(ids, c["ids"][i].get<std::vector<int64_t>>()) << text;
        EXPECT_EQ(tok->decode(ids), c["decoded"][i].get<std::string>()) << text;
      }
  }
}

// A malformed SentencePiece vocabulary is SY303 naming the key, never a crash.
TEST(GgufModel, BrokenSentencePieceVocabulariesAreRefusedByKey) {
  const std::string dir = std::string(SY_TEST_FIXTURES_DIR) + "/tokenizer/";
  struct Case {
    const char* what;
    std::function<void(GgufWriter&)> edit;
    std::string key;
  };
  const std::vector<Case> cases = {
      {"scores of the wrong length",
       [](GgufWriter& w) {
         w.f32s("tokenizer.ggml.scores", {0.f, -1.f});
       },
       "tokenizer.ggml.scores"},
      {"no scores", [](GgufWriter& w) { w.erase("tokenizer.ggml.scores"); },
       "tokenizer.ggml.scores"},
      {"types of the wrong length",
       [](GgufWriter& w) {
         w.i32s("tokenizer.ggml.token_type", {1, 1, 3});
       },
       "tokenizer.ggml.token_type"},
      {"a SEP token", [](GgufWriter& w) { w.boolean("tokenizer.ggml.add_sep_token", true); },
       "tokenizer.ggml.add_sep_token"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    TinyGguf t(Storage::f32);
    t.w.string("tokenizer.ggml.model", "llama");
    t.w.f32s("tokenizer.ggml.scores", std::vector<float>(size_t(kShape.vocab), 0.f));
    c.edit(t.w);
    Parsed f(t.w.bytes());
    try {
      gguf_tokenizer_json(f.file);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code, Errc::bad_tokenizer) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.key), std::string::npos) << e.what();
    }
  }
}

// Each broken or unknown piece of metadata is refused with its code, naming the key or tensor.
// Gemma's norms are stored as w + 1 (F32 in the converter's files); the loader takes the 1 off in
// f32 and then rounds to the run's dtype, so a BF16 Gemma file runs in its default bf16 too
// (it was refused: the norms had to load as f32).
TEST(GgufModel, GemmaNormsLoseTheirOneInEveryDtype) {
  for (const char* fixture : {"gemma2_converted", "gemma3_converted"}) {
    SCOPED_TRACE(fixture);
    const GgufFile f =
        GgufFile::open(std::string(SY_TEST_FIXTURES_DIR) + "/parity/" + fixture + "/model.gguf");
    const GgufModel model = describe_gguf(f);
    const WeightLoader load = gguf_weight_loader(f, model);
    const GgufTensor* t = f.find("blk.0.post_attention_norm.weight");
    ASSERT_TRUE(t);
    ASSERT_EQ(std::string(t->type->name), "F32");
    const int64_t n = t->elements();
    const float* stored = static_cast<const float*>(f.data(*t));
    std::vector<float> f32(static_cast<size_t>(n));
    std::vector<uint16_t> bf16(static_cast<size_t>(n));
    ASSERT_FALSE(load(Value{"l0.post_attention_layernorm", SY_DTYPE_F32, {n}}, f32.data()));
    ASSERT_FALSE(load(Value{"l0.post_attention_layernorm", SY_DTYPE_BF16, {n}}, bf16.data()));
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_EQ(f32[size_t(i)], stored[i] - 1.0f) << i;
      EXPECT_EQ(bf16[size_t(i)], sy_f32_to_bf16(stored[i] - 1.0f)) << i;
    }
  }
}

TEST(GgufModel, RefusesWhatItCannotHonourByName) {
  struct Case {
    const char* what;
    std::function<void(GgufWriter&)> edit;
    Errc code;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {"unknown arch key", [](GgufWriter& w) { w.u32("llama.attention.clamp_kqv", 8); },
       Errc::bad_config, "'llama.attention.clamp_kqv'"},
      {"architecture", [](GgufWriter& w) { w.string("general.architecture", "phi3"); },
       Errc::unknown_model_type, "'phi3'"},
      {"missing key", [](GgufWriter& w) { w.erase("llama.block_count"); }, Errc::bad_weights,
       "'llama.block_count' is missing"},
      {"mistyped key", [](GgufWriter& w) { w.string("llama.block_count", "two"); },
       Errc::bad_weights, "'llama.block_count' is string"},
      {"no architecture", [](GgufWriter& w) { w.erase("general.architecture"); }, Errc::bad_weights,
       "'general.architecture' is missing"},
      {"partial rotary", [](GgufWriter& w) { w.u32("llama.rope.dimension_count", 8); },
       Errc::bad_config, "'llama.rope.dimension_count'"},
      {"experts", [](GgufWriter& w) { w.u32("llama.expert_count", 8); }, Errc::bad_config,
       "'llama.expert_count'"},
      {"rope scaling", [](GgufWriter& w) { w.string("llama.rope.scaling.type", "longrope"); },
       Errc::bad_config, "'llama.rope.scaling.type'"},
      {"yarn extrapolation factor",
       [](GgufWriter& w) {
         w.string("llama.rope.scaling.type", "yarn").f32("llama.rope.scaling.factor", 4);
         w.f32("llama.rope.scaling.yarn_ext_factor", 0.5f);
       },
       Errc::bad_config, "'llama.rope.scaling.yarn_ext_factor'"},
      {"yarn betas without yarn",
       [](GgufWriter& w) {
         w.string("llama.rope.scaling.type", "linear").f32("llama.rope.scaling.factor", 4);
         w.f32("llama.rope.scaling.yarn_beta_fast", 16);
       },
       Errc::bad_config, "'llama.rope.scaling.yarn_*'"},
      {"tensor type",
       [](GgufWriter& w) {
         // Replaces layer 0's attn_q with a tensor of a valid type that has no dtype in the
         // vocabulary: not a malformed file (SY302) but SY212, naming the tensor and type.
         w.tensor("blk.0.attn_q.weight", {256, 64}, test::kGgmlIq2Xxs,
                  std::string(size_t(64 * 66), '\0'));
       },
       Errc::weight_type_unsupported, "tensor 'blk.0.attn_q.weight' is IQ2_XXS, a weight type"},
  };
  for (const Case& c : cases) {
    TinyGguf t(Storage::f32);
    c.edit(t.w);
    try {
      Parsed f(t.w.bytes());
      describe_gguf(f.file);
      ADD_FAILURE() << c.what << ": described; expected " << c.needle;
    } catch (const Error& e) {
      EXPECT_EQ(e.code, c.code) << c.what << ": " << e.what();
      EXPECT_EQ(e.where, "tiny.gguf") << c.what;
      EXPECT_NE(std::string(e.what()).find(c.needle), std::string::npos)
          << c.what << ": " << e.what();
    }
  }
  // --allow-config-key accepts a key it names.
  TinyGguf t(Storage::f32);
  t.w.u32("llama.attention.clamp_kqv", 8);
  Parsed f(t.w.bytes());
  EXPECT_NO_THROW(describe_gguf(f.file, {"llama.attention.clamp_kqv"}));
}

// A yarn rope_scaling as llama.cpp's converter writes it: its betas and attention factor are
// transformers' beta_fast, beta_slow and attention_factor.
TEST(GgufModel, YarnKeysOfTheConverterAreHonoured) {
  TinyGguf t(Storage::f32);
  t.w.string("llama.rope.scaling.type", "yarn").f32("llama.rope.scaling.factor", 4);
  t.w.u32("llama.rope.scaling.original_context_length", 64);
  t.w.f32("llama.rope.scaling.yarn_beta_fast", 16).f32("llama.rope.scaling.yarn_beta_slow", 2);
  t.w.f32("llama.rope.scaling.yarn_attn_factor", 0.5f).f32("llama.rope.scaling.yarn_ext_factor", 1);
  Parsed f(t.w.bytes());
  const GgufModel m = describe_gguf(f.file);
  const nlohmann::json& s = m.config["rope_scaling"];
  EXPECT_EQ(s["rope_type"], "yarn");
  EXPECT_EQ(s["factor"], 4.0);
  EXPECT_EQ(s["original_max_position_embeddings"], 64);
  EXPECT_EQ(s["beta_fast"], 16.0);
  EXPECT_EQ(s["beta_slow"], 2.0);
  EXPECT_EQ(s["attention_factor"], 0.5);
}

TEST(GgufModel, TokenizerKeysItCannotHonourAreRefused) {
  for (auto [key, value] :
       {std::pair{"tokenizer.ggml.model", "t5"}, std::pair{"tokenizer.ggml.pre", "no-such-pre"}}) {
    TinyGguf t(Storage::f32);
    t.w.string(key, value);
    Parsed f(t.w.bytes());
    try {
      gguf_tokenizer_json(f.file);
      ADD_FAILURE() << key << " = " << value << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code, Errc::bad_tokenizer) << e.what();
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  }
}

class GgufModelRun : public ::testing::TestWithParam<std::tuple<std::string, Storage>> {
 protected:
  static void SetUpTestSuite() {
    registry_ = new Registry(Registry::discover({{test::kPluginDir}, "test"}, LoadOptions{}));
  }
  static void TearDownTestSuite() { delete registry_; }
  static Registry* registry_;
};
Registry* GgufModelRun::registry_ = nullptr;

// A 12-token prefill (the quantized GEMM path) and 4 decode steps (the quantized GEMV), against
// the reference on the file's values. Without the loader's un-permute of attn_q / attn_k, the
// rope would rotate the wrong pairs and this fails.
TEST_P(GgufModelRun, LogitsMatchTheReferenceOnTheFilesValues) {
  const auto& [tier_name, storage] = GetParam();
  SY_SKIP_UNLESS_CPU_TIER(tier_name);
  test::ScopedCpuTier tier(tier_name);
  const TinyGguf tiny(storage);
  Parsed f(tiny.w.bytes());
  const GgufModel model = describe_gguf(f.file);
  const std::vector<int64_t> prompt = {5, 17, 99, 3, 42, 8, 120, 64, 2, 77, 31, 9};
  ImportOptions opts;
  opts.max_batch_tokens = int64_t(prompt.size());
  opts.context = kGgufContext;
  opts.weight_dtypes = model.weight_dtypes;
  const Inventory inventory = live_inventory(*registry_);
  Policy policy;
  policy.prefer = {kDLCPU};
  // The reference is exact products on the dequantized weights (the default would quantize the
  // activations to 16-bit blocks: docs/numerics.md).
  policy.numerics = Numerics::exact;
  const LayoutPlan lp = test::plan_single(
      [&](const ImportOptions& o) { return import_hf_config_json(model.config, "tiny.gguf", o); },
      opts, *registry_, inventory, policy);
  ASSERT_TRUE(lp.plan.ok()) << lp.plan.error->message;
  test::SequenceRunner session(lp.graph, lp.plan, *registry_, inventory,
                               gguf_weight_loader(f.file, model));
  test::LlamaReference ref(kShape,
                           [&](const std::string& n, int64_t i) { return tiny.weight(n, i); });
  auto expect_close = [](const std::vector<float>& got, const test::LlamaReference::Mat& want,
                         const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    double scale = 0;
    for (double w : want) scale = std::max(scale, std::abs(w));
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 2e-4 * std::max(1.0, scale)) << what << " logit " << i;
  };
  test::LlamaReference::Mat want;
  for (int64_t t : prompt) want = ref.step(t);
  expect_close(session.prefill(prompt), want, "prefill");
  for (int64_t t : {7, 88, 1, 120})
    expect_close(session.decode(t), ref.step(t), "decode of token " + std::to_string(t));
}

std::string run_name(const ::testing::TestParamInfo<std::tuple<std::string, Storage>>& info) {
  const char* storage[] = {"f32", "f16", "q8_0_q4_1"};
  return std::get<0>(info.param) + "_" + storage[int(std::get<1>(info.param))];
}

INSTANTIATE_TEST_SUITE_P(Tiers, GgufModelRun,
                         ::testing::Combine(::testing::ValuesIn(test::cpu_tiers()),
                                            ::testing::Values(Storage::f32, Storage::f16,
                                                              Storage::quantized)),
                         run_name);

}  // namespace
}  // namespace sy
