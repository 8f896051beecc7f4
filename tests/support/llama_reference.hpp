// A plain double-precision forward pass of a small llama decoder, one token at a time with its own
// KV cache, written here independently of the plugins: the reference the executor and the GGUF
// model tests compare logits with. Weights come from a function of (importer value name, flat
// index in Hugging Face's [N, K] layout), so a test can feed hashed values or values a quantizer
// rounded.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace sy::test {

struct LlamaShape {
  int64_t hidden = 64, layers = 2, heads = 4, kv_heads = 2, head_dim = 16, inter = 96, vocab = 128;
  double theta = 10000.0, eps = 1e-5;

  // The Hugging Face config.json of this shape (f32, untied head).
  nlohmann::json config() const {
    return {{"model_type", "llama"},
            {"hidden_size", hidden},
            {"num_hidden_layers", layers},
            {"num_attention_heads", heads},
            {"num_key_value_heads", kv_heads},
            {"head_dim", head_dim},
            {"intermediate_size", inter},
            {"vocab_size", vocab},
            {"rope_theta", theta},
            {"rms_norm_eps", eps},
            {"max_position_embeddings", 256},
            {"torch_dtype", "float32"},
            {"tie_word_embeddings", false}};
  }
};

// Deterministic weights by name: norms near 1, matrices small and random.
inline double hashed_weight(const std::string& name, int64_t i) {
  uint64_t h = std::hash<std::string>{}(name) ^ (uint64_t(i) * 0x9E3779B97F4A7C15ull);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  double u = double(h % 1000003) / 1000003.0 - 0.5;  // [-0.5, 0.5)
  bool norm = name.find("norm") != std::string::npos;
  return norm ? 1.0 + 0.2 * u : 0.35 * u;
}

class LlamaReference {
 public:
  using Mat = std::vector<double>;
  using WeightFn = std::function<double(const std::string&, int64_t)>;

  explicit LlamaReference(LlamaShape s = {}, WeightFn w = hashed_weight)
      : s_(s), w_(std::move(w)), keys_(size_t(s.layers)), values_(size_t(s.layers)) {}

  // The logits after `token` at the next position.
  Mat step(int64_t token) {
    Mat x(s_.hidden);
    for (int64_t i = 0; i < s_.hidden; ++i) x[i] = w_("embed_tokens", token * s_.hidden + i);
    for (int64_t l = 0; l < s_.layers; ++l) {
      const std::string p = "l" + std::to_string(l) + ".";
      Mat attn = attention(l, rms_norm(p + "input_layernorm", x));
      Mat o = linear(p + "o_proj", attn, s_.hidden);
      for (int64_t i = 0; i < s_.hidden; ++i) x[i] += o[i];
      Mat h2 = rms_norm(p + "post_attention_layernorm", x);
      Mat g = linear(p + "gate_proj", h2, s_.inter), u = linear(p + "up_proj", h2, s_.inter);
      for (int64_t i = 0; i < s_.inter; ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      Mat d = linear(p + "down_proj", g, s_.hidden);
      for (int64_t i = 0; i < s_.hidden; ++i) x[i] += d[i];
    }
    ++pos_;
    return linear("lm_head", rms_norm("norm", x), s_.vocab);
  }

 private:
  // y[n] = sum_k W[n][k] x[k], W stored [N, K] (Hugging Face layout).
  Mat linear(const std::string& w, const Mat& x, int64_t n) const {
    const int64_t k = int64_t(x.size());
    Mat y(n, 0.0);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < k; ++c) y[r] += w_(w, r * k + c) * x[c];
    return y;
  }
  Mat rms_norm(const std::string& w, const Mat& x) const {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / double(x.size()) + s_.eps);
    Mat y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w_(w, int64_t(i));
    return y;
  }
  // Rotary embedding, Hugging Face's (neox) halves.
  void rope(Mat& x, int64_t heads) const {
    const int64_t d = s_.head_dim, half = d / 2;
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < half; ++i) {
        const double freq = std::pow(s_.theta, -2.0 * double(i) / double(d));
        const double c = std::cos(double(pos_) * freq), s = std::sin(double(pos_) * freq);
        double& a = x[h * d + i];
        double& b = x[h * d + i + half];
        const double x1 = a, x2 = b;
        a = x1 * c - x2 * s;
        b = x2 * c + x1 * s;
      }
  }
  Mat attention(int64_t l, const Mat& h) {
    const std::string p = "l" + std::to_string(l) + ".";
    const int64_t d = s_.head_dim;
    Mat q = linear(p + "q_proj", h, s_.heads * d);
    Mat k = linear(p + "k_proj", h, s_.kv_heads * d);
    Mat v = linear(p + "v_proj", h, s_.kv_heads * d);
    rope(q, s_.heads);
    rope(k, s_.kv_heads);
    keys_[l].push_back(k);
    values_[l].push_back(v);
    Mat out(s_.heads * d, 0.0);
    for (int64_t hq = 0; hq < s_.heads; ++hq) {
      const int64_t hk = hq / (s_.heads / s_.kv_heads);
      std::vector<double> s;
      double mx = -1e300;
      for (const auto& kk : keys_[l]) {
        double dot = 0;
        for (int64_t i = 0; i < d; ++i) dot += q[hq * d + i] * kk[hk * d + i];
        s.push_back(dot / std::sqrt(double(d)));
        mx = std::max(mx, s.back());
      }
      double sum = 0;
      for (double& e : s) sum += (e = std::exp(e - mx));
      for (size_t j = 0; j < s.size(); ++j)
        for (int64_t i = 0; i < d; ++i) out[hq * d + i] += s[j] / sum * values_[l][j][hk * d + i];
    }
    return out;
  }

  LlamaShape s_;
  WeightFn w_;
  int64_t pos_ = 0;
  std::vector<std::vector<Mat>> keys_, values_;
};

}  // namespace sy::test
