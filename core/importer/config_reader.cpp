// ConfigReader and the fields every family shares.
#include <cmath>
#include <limits>

#include "core/capability/vocabulary.hpp"
#include "core/importer/model_spec.hpp"

namespace sy::importer {

using nlohmann::json;

ConfigReader::ConfigReader(const json& j, std::string file, std::string prefix, json defaults)
    : j_(j), file_(std::move(file)), prefix_(std::move(prefix)), defaults_(std::move(defaults)) {}

ConfigReader ConfigReader::with_defaults(const json& more) const {
  json d = defaults_;
  for (const auto& [k, v] : more.items()) d[k] = v;
  return ConfigReader(j_, file_, prefix_, std::move(d));
}

std::string ConfigReader::where(const std::string& field) const {
  return file_ + ":" + prefix_ + field;
}

void ConfigReader::fail(const std::string& field, const std::string& what) const {
  throw Error(Errc::bad_config, "invalid model config: field '" + prefix_ + field + "': " + what,
              where(field));
}

const json* ConfigReader::find(const char* field) const {
  if (auto it = j_.find(field); it != j_.end() && !it->is_null()) return &*it;
  if (auto it = defaults_.find(field); it != defaults_.end() && !it->is_null()) return &*it;
  return nullptr;
}

bool ConfigReader::has(const char* field) const {
  return find(field) != nullptr;
}

bool ConfigReader::explicitly_null(const char* field) const {
  auto it = j_.find(field);
  return it != j_.end() && it->is_null();
}

std::vector<std::string> ConfigReader::keys() const {
  std::vector<std::string> out;
  if (j_.is_object())
    for (const auto& [k, v] : j_.items()) out.push_back(k);
  return out;
}

int64_t ConfigReader::size(const char* field, int64_t lo, int64_t hi,
                           std::optional<int64_t> fallback) const {
  const json* v = find(field);
  if (!v) {
    if (fallback) return *fallback;
    fail(field, "missing, and the importer needs it");
  }
  auto range = "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  // Unsigned values above INT64_MAX must not be converted; check before reading as int64.
  if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(hi))
    fail(field, "must be " + range + ", got " + v->dump());
  if (!v->is_number_integer()) fail(field, "must be " + range + ", got " + v->dump());
  int64_t x = v->get<int64_t>();
  if (x < lo || x > hi) fail(field, "must be " + range + ", got " + std::to_string(x));
  return x;
}

double ConfigReader::number(const char* field, double lo, double hi,
                            std::optional<double> fallback) const {
  const json* v = find(field);
  if (!v) {
    if (fallback) return *fallback;
    fail(field, "missing, and the importer needs it");
  }
  if (!v->is_number()) fail(field, "must be a number, got " + v->dump());
  double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    fail(field, "must be a number in [" + json(lo).dump() + ", " + json(hi).dump() + "], got " +
                    v->dump());
  return x;
}

bool ConfigReader::boolean(const char* field, bool fallback) const {
  const json* v = find(field);
  if (!v) return fallback;
  if (!v->is_boolean()) fail(field, "must be true or false, got " + v->dump());
  return v->get<bool>();
}

std::string ConfigReader::string(const char* field) const {
  const json* v = find(field);
  if (!v) fail(field, "missing, and the importer needs it");
  if (!v->is_string()) fail(field, "must be a string, got " + v->dump());
  return v->get<std::string>();
}

const json* ConfigReader::array(const char* field, size_t n) const {
  const json* v = find(field);
  if (!v) return nullptr;
  if (!v->is_array()) fail(field, "must be an array, got " + v->dump());
  if (v->size() != n)
    fail(field, "must have one entry per layer (" + std::to_string(n) + "), has " +
                    std::to_string(v->size()));
  return v;
}

namespace {

// Limits that keep every size sane and every product below int64 (each is checked before any
// multiplication; element counts of whole values are checked again by the builder).
constexpr int64_t kMaxLayers = 1000;
constexpr int64_t kMaxVocab = 10'000'000;
constexpr int64_t kMaxHidden = 1'000'000;
constexpr int64_t kMaxIntermediate = 10'000'000;
constexpr int64_t kMaxHeads = 100'000;
constexpr int64_t kMaxHeadDim = 100'000;
constexpr int64_t kMaxProjection = 1'000'000;  // heads * head_dim

sy_dtype read_dtype(const ConfigReader& r) {
  // transformers >= 4.56 writes "dtype", older versions "torch_dtype".
  const char* field = r.has("torch_dtype") ? "torch_dtype" : r.has("dtype") ? "dtype" : nullptr;
  if (!field) return SY_DTYPE_BF16;  // absent (e.g. gpt-oss-20b): the usual checkpoint dtype
  std::string s = r.string(field);
  if (s == "bfloat16") return SY_DTYPE_BF16;
  if (s == "float16") return SY_DTYPE_F16;
  if (s == "float32") return SY_DTYPE_F32;
  r.fail(field, "unsupported dtype '" + s + "' (bfloat16, float16, float32)");
}

}  // namespace

void read_common(const ConfigReader& r, const CommonDefaults& d, ModelSpec& m) {
  m.dtype = read_dtype(r);
  m.hidden = r.size("hidden_size", 1, kMaxHidden);
  m.layers = r.size("num_hidden_layers", 1, kMaxLayers);
  m.heads = r.size("num_attention_heads", 1, kMaxHeads);
  m.kv_heads = r.size("num_key_value_heads", 1, kMaxHeads, m.heads);
  if (m.kv_heads > m.heads || m.heads % m.kv_heads != 0)
    r.fail("num_key_value_heads", "num_attention_heads (" + std::to_string(m.heads) +
                                      ") must be a multiple of num_key_value_heads (" +
                                      std::to_string(m.kv_heads) + ")");
  if (!r.has("head_dim") && !d.head_dim && m.hidden % m.heads != 0)
    r.fail("head_dim", "missing, and hidden_size (" + std::to_string(m.hidden) +
                           ") is not a multiple of num_attention_heads (" +
                           std::to_string(m.heads) + ")");
  m.head_dim = r.size("head_dim", 1, kMaxHeadDim, d.head_dim.value_or(m.hidden / m.heads));
  if (m.heads > kMaxProjection / m.head_dim)
    r.fail("head_dim", "num_attention_heads * head_dim = " + std::to_string(m.heads) + " * " +
                           std::to_string(m.head_dim) + " exceeds " +
                           std::to_string(kMaxProjection));
  m.intermediate = r.size("intermediate_size", 1, kMaxIntermediate);
  m.vocab = r.size("vocab_size", 1, kMaxVocab);
  m.eps = r.number("rms_norm_eps", 0, 1, d.eps);
  if (m.eps <= 0) r.fail("rms_norm_eps", "must be positive");
  m.rotary_dim = m.head_dim;
  m.layer.assign(static_cast<size_t>(m.layers), LayerSpec{});
  m.tie_embeddings = r.boolean("tie_word_embeddings", d.tie_embeddings);
  m.qkv_bias = m.o_bias = r.boolean("attention_bias", d.attention_bias);
}

void read_rotary_dim(const ConfigReader& r, std::optional<double> from_rope_dict, ModelSpec& m) {
  const double factor =
      from_rope_dict ? *from_rope_dict : r.number("partial_rotary_factor", 0, 1, 1.0);
  if (!(factor > 0 && factor <= 1))
    r.fail("partial_rotary_factor", "must be in (0, 1], got " + std::to_string(factor));
  // transformers: int(head_dim * partial_rotary_factor).
  m.rotary_dim = static_cast<int64_t>(std::floor(static_cast<double>(m.head_dim) * factor));
  if (m.rotary_dim < 2 || m.rotary_dim % 2 != 0)
    r.fail("partial_rotary_factor",
           "head_dim * partial_rotary_factor = " + std::to_string(m.rotary_dim) +
               " rotary dimensions, must be even and at least 2");
}

void read_activation(const ConfigReader& r, const char* field, const char* fallback, ModelSpec& m) {
  std::string act = r.has(field) ? r.string(field) : fallback;
  if (act == "silu" || act == "swish")
    m.gelu.clear();
  else if (act == "gelu_pytorch_tanh" || act == "gelu_new" || act == "gelu_fast")
    m.gelu = "tanh";
  else if (act == "gelu")
    m.gelu = "none";
  else
    r.fail(field, "unsupported activation '" + act + "' (silu, gelu, gelu_pytorch_tanh)");
}

bool read_layer_types(const ConfigReader& r, ModelSpec& m) {
  const json* types = r.array("layer_types", static_cast<size_t>(m.layers));
  if (!types) return false;
  for (size_t i = 0; i < types->size(); ++i) {
    const json& t = (*types)[i];
    std::string field = "layer_types[" + std::to_string(i) + "]";
    if (t == "full_attention") continue;
    if (t != "sliding_attention")
      r.fail(field, "must be \"full_attention\" or \"sliding_attention\", got " + t.dump());
    int64_t window = r.size("sliding_window", 1, int64_t(1) << 31);
    m.layer[i].window_left = window - 1;
  }
  return true;
}

}  // namespace sy::importer
