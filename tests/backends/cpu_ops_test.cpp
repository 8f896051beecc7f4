// cpu_onednn's decoder op kernels (everything but attention), through the real plugin:
// prepared with sy::prepare_kernel, executed on host buffers through PreparedKernel, and
// compared with plain double-precision references written here, over a grid of shapes and
// dtypes. Then bad input through the ABI, and check agreeing with prepare.
//
// Tolerances (|got − ref| <= abs + rel·|ref|), with the reference computed in double from
// the values actually stored (bf16 inputs already rounded):
//   f32 elementwise, norms, rope, softmax: rel 1e-5, abs 1e-6 (the kernels' exp/erf/tanh
//     are polynomial approximations within a few ulp; erf's absolute error is < 1.5e-7).
//   f32 matmul: rel 1e-5, abs 1e-6·√K (f32 accumulation of K products of magnitude <= 1).
//   bf16 anything: rel 1e-2 (the output is rounded to 8 significant bits, 2^-9 ≈ 2e-3
//     relative), abs 1e-3 (matmul: 1e-4·√K).
//   copy, embedding, kv_cache_append, argmax: exact.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "core/plugin/kernel.hpp"
#include "core/plugin/loader.hpp"
#include "support/cpu_tiers.hpp"
#include "support/expected.hpp"
#include "support/test_paths.hpp"

namespace sy {
namespace {

struct Tol {
  double rel, abs;
};
constexpr Tol kF32{1e-5, 1e-6};
constexpr Tol kBf16{1e-2, 1e-3};
constexpr Tol kExact{0, 0};
Tol tol_for(sy_dtype dt) {
  return dt == SY_DTYPE_BF16 ? kBf16 : kF32;
}
Tol matmul_tol(sy_dtype dt, int64_t k) {
  double s = std::sqrt(static_cast<double>(k));
  return dt == SY_DTYPE_BF16 ? Tol{1e-2, 1e-4 * s} : Tol{1e-5, 1e-6 * s};
}

// bf16 from f32 by round to nearest even, written independently of the plugin: pick the
// nearer of the two bf16 neighbours in double, the even one on a tie.
uint16_t bf16_of(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
  if (std::isinf(f)) return static_cast<uint16_t>(u >> 16);
  uint32_t lo = u & 0xffff0000u, hi = lo + 0x10000u;
  double dlo = std::abs(static_cast<double>(std::bit_cast<float>(lo)) - f);
  double dhi = std::abs(static_cast<double>(std::bit_cast<float>(hi)) - f);
  if (std::isinf(std::bit_cast<float>(hi)) && !std::isinf(f))
    dhi = std::ldexp(1.0, 128) - std::abs(double(f));
  uint32_t pick = dlo < dhi ? lo : dhi < dlo ? hi : ((lo >> 16) & 1 ? hi : lo);
  return static_cast<uint16_t>(pick >> 16);
}
double bf16_value(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

// A host tensor: owned bytes, a DLTensor on kDLCPU, values in and out as double.
class Buf {
 public:
  Buf(sy_dtype dt, std::vector<int64_t> shape)
      : dt_(dt), shape_(std::move(shape)), bytes_((elements() * sy_dtype_size(dt) + 7) / 8 + 1) {
    dims_ = shape_;
    if (dims_.empty()) dims_.push_back(1);  // rank 0 still needs a non-NULL shape pointer
    t_.data = bytes_.data();
    t_.device = {kDLCPU, 0};
    t_.ndim = static_cast<int32_t>(shape_.size());
    t_.dtype = sy_dtype_to_dl(dt);
    t_.shape = dims_.data();
  }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;

  int64_t elements() const {
    int64_t n = 1;
    for (int64_t d : shape_) n *= d;
    return n;
  }
  DLTensor* dl() { return &t_; }
  TensorDesc desc() const { return {dt_, shape_, SY_MEMORY_HOST}; }
  sy_dtype dtype() const { return dt_; }
  char* bytes() { return reinterpret_cast<char*>(bytes_.data()); }

  // Stores `v` in the dtype; returns the values as stored.
  std::vector<double> set(const std::vector<double>& v) {
    for (size_t i = 0; i < v.size(); ++i) put(i, v[i]);
    return get();
  }
  std::vector<double> get() const {
    std::vector<double> out(static_cast<size_t>(elements()));
    const char* b = reinterpret_cast<const char*>(bytes_.data());
    for (size_t i = 0; i < out.size(); ++i) switch (dt_) {
        case SY_DTYPE_F32: out[i] = load<float>(b, i); break;
        case SY_DTYPE_BF16: out[i] = bf16_value(load<uint16_t>(b, i)); break;
        case SY_DTYPE_I32: out[i] = load<int32_t>(b, i); break;
        case SY_DTYPE_I64: out[i] = static_cast<double>(load<int64_t>(b, i)); break;
        default: throw std::runtime_error("Buf: dtype");
      }
    return out;
  }
  void put(size_t i, double x) {
    char* b = bytes();
    switch (dt_) {
      case SY_DTYPE_F32: store(b, i, static_cast<float>(x)); break;
      case SY_DTYPE_BF16: store(b, i, bf16_of(static_cast<float>(x))); break;
      case SY_DTYPE_I32: store(b, i, static_cast<int32_t>(x)); break;
      case SY_DTYPE_I64: store(b, i, static_cast<int64_t>(x)); break;
      default: throw std::runtime_error("Buf: dtype");
    }
  }

 private:
  template <typename T>
  static T load(const char* b, size_t i) {
    T v;
    std::memcpy(&v, b + i * sizeof(T), sizeof(T));
    return v;
  }
  template <typename T>
  static void store(char* b, size_t i, T v) {
    std::memcpy(b + i * sizeof(T), &v, sizeof(T));
  }
  sy_dtype dt_;
  std::vector<int64_t> shape_, dims_;
  std::vector<uint64_t> bytes_;  // 8-byte aligned
  DLTensor t_{};
};

std::vector<double> uniform(size_t n, double lo, double hi, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

std::string dt_name(sy_dtype d) {
  return sy_dtype_name(d);
}
std::string dims(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(s[i]);
  }
  return out + "]";
}

// Every element within tolerance; reports the count and the worst few.
void expect_close(const std::vector<double>& got, const std::vector<double>& ref, Tol tol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  size_t bad = 0;
  double worst = 0;
  size_t worst_i = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    bool same_special = (std::isnan(got[i]) && std::isnan(ref[i])) || got[i] == ref[i];
    double err = std::abs(got[i] - ref[i]);
    double allowed = tol.abs + tol.rel * std::abs(ref[i]);
    if (!same_special && !(err <= allowed)) {
      if (bad < 3)
        ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", expected " << ref[i]
                      << " (error " << err << ", allowed " << allowed << ")";
      ++bad;
    }
    if (err > worst) worst = err, worst_i = i;
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << ref.size()
                     << " elements out of tolerance; worst error " << worst << " at " << worst_i;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}
bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// --- references, in double ---------------------------------------------------------

double silu(double x) {
  return x / (1 + std::exp(-x));
}
double gelu(double x, bool tanh_approx) {
  if (tanh_approx)
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
  return 0.5 * x * (1 + std::erf(x / std::numbers::sqrt2));
}

// --- the fixture -------------------------------------------------------------------

class CpuOps : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto out = load_plugin(test::kPluginDir / "cpu_onednn.so", LoadOptions{});
    ASSERT_TRUE(out.plugin) << out.diagnostic->reason;
    plugin_ = out.plugin.release();
  }
  static void TearDownTestSuite() {
    delete plugin_;
    plugin_ = nullptr;
  }

  static size_t kernel(const std::string& name) {
    for (size_t i = 0; i < plugin_->kernels().size(); ++i)
      if (plugin_->kernels()[i].kernel == name) return i;
    throw std::runtime_error("no kernel " + name);
  }
  static std::unique_ptr<PreparedKernel> prepare(const std::string& name, const OpDesc& op) {
    auto r = prepare_kernel(*plugin_, kernel(name), 0, op);
    EXPECT_TRUE(r) << name << ": " << test::why(r);
    return r ? std::move(*r) : nullptr;
  }
  static std::string run(PreparedKernel& k, std::vector<Buf*> in, std::vector<Buf*> out) {
    std::vector<const DLTensor*> i, o;
    for (Buf* b : in) i.push_back(b->dl());
    for (Buf* b : out) o.push_back(b->dl());
    return test::why(k.execute(i, o));
  }
  static CheckResult check(const std::string& name, const OpDesc& op) {
    return plugin_->check(kernel(name), plugin_->devices().at(0), op);
  }
  // Prepares, runs, and expects success.
  static void prepare_and_run(const std::string& name, const OpDesc& op, std::vector<Buf*> in,
                              std::vector<Buf*> out) {
    auto k = prepare(name, op);
    ASSERT_TRUE(k);
    EXPECT_EQ(run(*k, std::move(in), std::move(out)), "") << name;
  }

  static Plugin* plugin_;
};
Plugin* CpuOps::plugin_ = nullptr;

OpDesc make_op(sy_op_kind kind, std::vector<const Buf*> in, std::vector<const Buf*> out) {
  OpDesc op;
  op.op = kind;
  for (const Buf* b : in) op.inputs.push_back(b->desc());
  for (const Buf* b : out) op.outputs.push_back(b->desc());
  return op;
}

const sy_dtype kFloatTypes[] = {SY_DTYPE_F32, SY_DTYPE_BF16};

// --- unary ---------------------------------------------------------------------------

// The kernels with a loop per instruction-set tier (cpu_tier.hpp: gemv.hpp, elementwise_tier.hpp)
// run once per tier against the double reference; a tier this CPU lacks is skipped by reason.
class CpuOpsTier : public CpuOps, public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    SY_SKIP_UNLESS_CPU_TIER(GetParam());
    tier_.emplace(GetParam());
  }
  std::optional<test::ScopedCpuTier> tier_;
};

TEST_P(CpuOpsTier, SiluAndGeluMatchReference) {
  struct Case {
    const char* kernel;
    sy_op_kind op;
    const char* approximate;  // nullptr: no attribute
  };
  const Case cases[] = {{"silu", SY_OP_SILU, nullptr},
                        {"gelu", SY_OP_GELU, nullptr},
                        {"gelu", SY_OP_GELU, "none"},
                        {"gelu", SY_OP_GELU, "tanh"}};
  const std::vector<std::vector<int64_t>> shapes = {{37}, {3, 5, 129}, {4, 20011}};
  for (sy_dtype dt : kFloatTypes)
    for (const Case& c : cases)
      for (const auto& shape : shapes) {
        std::string what = std::string(c.kernel) + " " + (c.approximate ? c.approximate : "") +
                           " " + dt_name(dt) + " " + dims(shape);
        Buf x(dt, shape), y(dt, shape);
        auto xv = x.set(uniform(x.elements(), -9, 9, 1));
        OpDesc op = make_op(c.op, {&x}, {&y});
        if (c.approximate) op.set(SY_ATTR_GELU_APPROX, std::string(c.approximate));
        prepare_and_run(c.kernel, op, {&x}, {&y});
        bool tanh_approx = c.approximate && std::string(c.approximate) == "tanh";
        std::vector<double> ref(xv.size());
        for (size_t i = 0; i < ref.size(); ++i)
          ref[i] = c.op == SY_OP_SILU ? silu(xv[i]) : gelu(xv[i], tanh_approx);
        expect_close(y.get(), ref, tol_for(dt), what);
      }
}

TEST_P(CpuOpsTier, UnaryEdgeValues) {
  const std::vector<double> edge = {0.0,
                                    -0.0,
                                    1e-30,
                                    -1e-30,
                                    20,
                                    -20,
                                    88,
                                    -88,
                                    100,
                                    -100,
                                    1e30,
                                    -1e30,
                                    std::numeric_limits<double>::infinity(),
                                    -std::numeric_limits<double>::infinity()};
  for (const char* approx : {"none", "tanh"}) {
    Buf x(SY_DTYPE_F32, {int64_t(edge.size())}), y(SY_DTYPE_F32, {int64_t(edge.size())});
    auto xv = x.set(edge);
    OpDesc op = make_op(SY_OP_GELU, {&x}, {&y});
    op.set(SY_ATTR_GELU_APPROX, std::string(approx));
    prepare_and_run("gelu", op, {&x}, {&y});
    std::vector<double> ref;
    for (double v : xv)
      ref.push_back(std::isinf(v) ? (v > 0 ? v : 0.0) : gelu(v, std::string(approx) == "tanh"));
    expect_close(y.get(), ref, kF32, std::string("gelu edge values ") + approx);
  }
  Buf x(SY_DTYPE_F32, {int64_t(edge.size())}), y(SY_DTYPE_F32, {int64_t(edge.size())});
  auto xv = x.set(edge);
  prepare_and_run("silu", make_op(SY_OP_SILU, {&x}, {&y}), {&x}, {&y});
  std::vector<double> ref;
  for (double v : xv) ref.push_back(std::isinf(v) ? (v > 0 ? v : 0.0) : silu(v));
  expect_close(y.get(), ref, kF32, "silu edge values");
}

// --- binary --------------------------------------------------------------------------

TEST_P(CpuOpsTier, AddAndMulBroadcastSuffix) {
  struct Shapes {
    std::vector<int64_t> a, b;
  };
  const Shapes grid[] = {{{3, 5, 129}, {3, 5, 129}}, {{3, 5, 129}, {5, 129}},
                         {{3, 5, 129}, {129}},       {{37}, {37}},
                         {{64, 1031}, {1031}},       {{2, 40009}, {2, 40009}}};
  for (sy_dtype dt : kFloatTypes)
    for (sy_op_kind kind : {SY_OP_ADD, SY_OP_MUL})
      for (const Shapes& s : grid) {
        std::string what = std::string(sy_op_kind_name(kind)) + " " + dt_name(dt) + " " +
                           dims(s.a) + " " + dims(s.b);
        Buf a(dt, s.a), b(dt, s.b), c(dt, s.a);
        auto av = a.set(uniform(a.elements(), -4, 4, 2));
        auto bv = b.set(uniform(b.elements(), -4, 4, 3));
        prepare_and_run(sy_op_kind_name(kind), make_op(kind, {&a, &b}, {&c}), {&a, &b}, {&c});
        std::vector<double> ref(av.size());
        for (size_t i = 0; i < ref.size(); ++i) {
          double bi = bv[i % bv.size()];
          ref[i] = kind == SY_OP_ADD ? av[i] + bi : av[i] * bi;
        }
        expect_close(c.get(), ref, tol_for(dt), what);
      }
}

TEST_P(CpuOpsTier, GatedProductsMatchReference) {
  struct Case {
    const char* kernel;
    sy_op_kind op;
    const char* approximate;
  };
  const Case cases[] = {{"silu_mul", SY_OP_SILU_MUL, nullptr},
                        {"gelu_mul", SY_OP_GELU_MUL, "none"},
                        {"gelu_mul", SY_OP_GELU_MUL, "tanh"}};
  for (sy_dtype dt : kFloatTypes)
    for (const Case& c : cases)
      for (const std::vector<int64_t>& shape :
           {std::vector<int64_t>{2, 7, 333}, std::vector<int64_t>{1, 40013}}) {
        std::string what = std::string(c.kernel) + " " + (c.approximate ? c.approximate : "") +
                           " " + dt_name(dt) + " " + dims(shape);
        Buf g(dt, shape), u(dt, shape), y(dt, shape);
        auto gv = g.set(uniform(g.elements(), -8, 8, 4));
        auto uv = u.set(uniform(u.elements(), -3, 3, 5));
        OpDesc op = make_op(c.op, {&g, &u}, {&y});
        if (c.approximate) op.set(SY_ATTR_GELU_APPROX, std::string(c.approximate));
        prepare_and_run(c.kernel, op, {&g, &u}, {&y});
        bool tanh_approx = c.approximate && std::string(c.approximate) == "tanh";
        std::vector<double> ref(gv.size());
        for (size_t i = 0; i < ref.size(); ++i)
          ref[i] = (c.op == SY_OP_SILU_MUL ? silu(gv[i]) : gelu(gv[i], tanh_approx)) * uv[i];
        expect_close(y.get(), ref, tol_for(dt), what);
      }
}

TEST_P(CpuOpsTier, AddInPlace) {
  Buf a(SY_DTYPE_F32, {4, 300}), b(SY_DTYPE_F32, {300});
  auto av = a.set(uniform(a.elements(), -1, 1, 6));
  auto bv = b.set(uniform(b.elements(), -1, 1, 7));
  prepare_and_run("add", make_op(SY_OP_ADD, {&a, &b}, {&a}), {&a, &b}, {&a});
  std::vector<double> ref(av.size());
  for (size_t i = 0; i < ref.size(); ++i) ref[i] = av[i] + bv[i % 300];
  expect_close(a.get(), ref, kF32, "add, c = a");
}

// --- copy ----------------------------------------------------------------------------

TEST_P(CpuOpsTier, CopyConvertsF32AndBf16AndCopiesTheRestExactly) {
  const std::pair<sy_dtype, sy_dtype> pairs[] = {
      {SY_DTYPE_F32, SY_DTYPE_F32},  {SY_DTYPE_BF16, SY_DTYPE_BF16}, {SY_DTYPE_F32, SY_DTYPE_BF16},
      {SY_DTYPE_BF16, SY_DTYPE_F32}, {SY_DTYPE_I32, SY_DTYPE_I32},   {SY_DTYPE_I64, SY_DTYPE_I64}};
  for (auto [from, to] : pairs)
    for (const std::vector<int64_t>& shape :
         {std::vector<int64_t>{3, 37}, std::vector<int64_t>{100003}}) {
      std::string what = "copy " + dt_name(from) + " -> " + dt_name(to) + " " + dims(shape);
      Buf x(from, shape), y(to, shape);
      bool integer = from == SY_DTYPE_I32 || from == SY_DTYPE_I64;
      std::vector<double> v = uniform(x.elements(), integer ? -1e9 : -1e3, integer ? 1e9 : 1e3, 8);
      if (integer)
        for (auto& e : v) e = std::round(e);
      auto xv = x.set(v);
      prepare_and_run("copy", make_op(SY_OP_COPY, {&x}, {&y}), {&x}, {&y});
      std::vector<double> ref = xv;
      if (to == SY_DTYPE_BF16)
        for (auto& e : ref) e = bf16_value(bf16_of(static_cast<float>(e)));
      expect_close(y.get(), ref, kExact, what);
    }
}

TEST_P(CpuOpsTier, CopyToBf16RoundsToNearestEven) {
  // Exact ties (low half 0x8000) round to the even neighbour; NaN stays NaN; overflow
  // past bf16's largest finite value rounds to infinity, as it does for any RNE.
  const uint32_t bits[] = {0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f807fffu, 0xbf818000u,
                           0x7f7fffffu, 0x7fc00001u, 0x00000001u, 0x80000000u, 0x7f800000u};
  Buf x(SY_DTYPE_F32, {10}), y(SY_DTYPE_BF16, {10});
  for (size_t i = 0; i < 10; ++i) std::memcpy(x.bytes() + 4 * i, &bits[i], 4);
  prepare_and_run("copy", make_op(SY_OP_COPY, {&x}, {&y}), {&x}, {&y});
  const uint16_t want[] = {0x3f80, 0x3f82, 0x3f81, 0x3f80, 0xbf82,
                           0x7f80, 0x7fc0, 0x0000, 0x8000, 0x7f80};
  for (size_t i = 0; i < 10; ++i) {
    uint16_t got;
    std::memcpy(&got, y.bytes() + 2 * i, 2);
    EXPECT_EQ(got, want[i]) << "f32 bits 0x" << std::hex << bits[i];
    EXPECT_EQ(got, bf16_of(std::bit_cast<float>(bits[i])))
        << "reference, bits 0x" << std::hex << bits[i];
  }
}

// --- softmax -------------------------------------------------------------------------

TEST_P(CpuOpsTier, SoftmaxMatchesReference) {
  const std::vector<std::vector<int64_t>> shapes = {{1, 1000}, {3, 7, 33}, {8, 32001}, {5}};
  for (sy_dtype dt : kFloatTypes)
    for (const auto& shape : shapes) {
      std::string what = "softmax " + dt_name(dt) + " " + dims(shape);
      Buf x(dt, shape), y(dt, shape);
      std::vector<double> v = uniform(x.elements(), -20, 20, 9);
      const int64_t n = shape.back();
      if (v.size() > 10) {  // a masked row: -inf entries get exactly 0
        v[1] = -std::numeric_limits<double>::infinity();
        v[3] = -std::numeric_limits<double>::infinity();
      }
      auto xv = x.set(v);
      prepare_and_run("softmax", make_op(SY_OP_SOFTMAX, {&x}, {&y}), {&x}, {&y});
      std::vector<double> ref(xv.size());
      for (size_t r = 0; r < xv.size() / n; ++r) {
        double m = -std::numeric_limits<double>::infinity(), sum = 0;
        for (int64_t i = 0; i < n; ++i) m = std::max(m, xv[r * n + i]);
        for (int64_t i = 0; i < n; ++i) sum += std::exp(xv[r * n + i] - m);
        for (int64_t i = 0; i < n; ++i) ref[r * n + i] = std::exp(xv[r * n + i] - m) / sum;
      }
      Tol tol = dt == SY_DTYPE_BF16 ? Tol{1e-2, 1e-6} : Tol{1e-5, 1e-9};
      auto got = y.get();
      expect_close(got, ref, tol, what);
      if (v.size() > 10) {
        EXPECT_EQ(got[1], 0.0) << what;
        EXPECT_EQ(got[3], 0.0) << what;
      }
    }
}

// --- argmax --------------------------------------------------------------------------

TEST_F(CpuOps, ArgmaxFindsFirstMaximum) {
  for (sy_dtype dt : kFloatTypes)
    for (const std::vector<int64_t>& shape :
         {std::vector<int64_t>{5, 1001}, std::vector<int64_t>{2, 3, 50021}}) {
      std::string what = "argmax " + dt_name(dt) + " " + dims(shape);
      const int64_t n = shape.back();
      std::vector<int64_t> out_shape(shape.begin(), shape.end() - 1);
      Buf x(dt, shape), idx(SY_DTYPE_I64, out_shape);
      std::vector<double> v = uniform(x.elements(), -10, 10, 10);
      v[7] = v[500] = 11;  // row 0: a tie, the first wins
      v[n + n - 1] = 12;   // row 1: the maximum last
      v[2 * n + 10] = std::nan("");
      v[2 * n + 20] = std::nan("");  // row 2: the first NaN wins
      v[2 * n + 30] = 50;
      auto xv = x.set(v);
      prepare_and_run("argmax", make_op(SY_OP_ARGMAX, {&x}, {&idx}), {&x}, {&idx});
      std::vector<double> ref;
      for (size_t r = 0; r < xv.size() / n; ++r) {
        int64_t best = 0;
        for (int64_t i = 0; i < n; ++i) {
          double e = xv[r * n + i], b = xv[r * n + best];
          if (std::isnan(b)) break;
          if (std::isnan(e) || e > b) best = i;
        }
        ref.push_back(static_cast<double>(best));
      }
      EXPECT_EQ(ref[0], 7);
      EXPECT_EQ(ref[1], n - 1);
      EXPECT_EQ(ref[2], 10);
      expect_close(idx.get(), ref, kExact, what);
    }
}

TEST_F(CpuOps, ArgmaxOfAVectorIsRankZeroOrOne) {
  for (const std::vector<int64_t>& out_shape : {std::vector<int64_t>{}, std::vector<int64_t>{1}}) {
    Buf x(SY_DTYPE_F32, {777}), idx(SY_DTYPE_I64, out_shape);
    std::vector<double> v = uniform(777, -1, 1, 11);
    v[123] = 2;
    x.set(v);
    prepare_and_run("argmax", make_op(SY_OP_ARGMAX, {&x}, {&idx}), {&x}, {&idx});
    EXPECT_EQ(idx.get()[0], 123) << "index shape " << dims(out_shape);
  }
}

// --- norms ---------------------------------------------------------------------------

TEST_P(CpuOpsTier, RmsNormMatchesReference) {
  const std::vector<std::vector<int64_t>> shapes = {{37}, {3, 5, 129}, {2, 1000}, {64, 2048}};
  for (sy_dtype dt : kFloatTypes)
    for (double offset : {0.0, 1.0})
      for (const auto& shape : shapes) {
        std::string what =
            "rms_norm " + dt_name(dt) + " offset " + std::to_string(offset) + " " + dims(shape);
        const int64_t h = shape.back();
        Buf x(dt, shape), w(dt, {h}), y(dt, shape);
        auto xv = x.set(uniform(x.elements(), -3, 3, 12));
        auto wv = w.set(uniform(h, -1, 1, 13));
        const double eps = 1e-5;
        OpDesc op = make_op(SY_OP_RMS_NORM, {&x, &w}, {&y});
        op.set(SY_ATTR_EPS, eps);
        if (offset != 0) op.set(SY_ATTR_WEIGHT_OFFSET, offset);
        prepare_and_run("rms_norm", op, {&x, &w}, {&y});
        std::vector<double> ref(xv.size());
        for (size_t r = 0; r < xv.size() / h; ++r) {
          double ss = 0;
          for (int64_t i = 0; i < h; ++i) ss += xv[r * h + i] * xv[r * h + i];
          double inv = 1 / std::sqrt(ss / h + eps);
          for (int64_t i = 0; i < h; ++i) ref[r * h + i] = xv[r * h + i] * inv * (wv[i] + offset);
        }
        expect_close(y.get(), ref, tol_for(dt), what);
      }
}

TEST_P(CpuOpsTier, RmsNormDefaultEpsAndInPlace) {
  Buf x(SY_DTYPE_F32, {3, 64}), w(SY_DTYPE_F32, {64});
  std::vector<double> v = uniform(192, -1e-3, 1e-3, 14);  // small: eps matters
  auto xv = x.set(v);
  auto wv = w.set(uniform(64, 0.5, 1.5, 15));
  prepare_and_run("rms_norm", make_op(SY_OP_RMS_NORM, {&x, &w}, {&x}), {&x, &w}, {&x});
  std::vector<double> ref(xv.size());
  for (int r = 0; r < 3; ++r) {
    double ss = 0;
    for (int i = 0; i < 64; ++i) ss += xv[r * 64 + i] * xv[r * 64 + i];
    for (int i = 0; i < 64; ++i)
      ref[r * 64 + i] = xv[r * 64 + i] / std::sqrt(ss / 64 + 1e-6) * wv[i];
  }
  expect_close(x.get(), ref, kF32, "rms_norm default eps 1e-6, y = x");
}

TEST_P(CpuOpsTier, LayerNormMatchesReference) {
  const std::vector<std::vector<int64_t>> shapes = {{37}, {3, 5, 129}, {64, 2048}};
  for (sy_dtype dt : kFloatTypes)
    for (const auto& shape : shapes) {
      std::string what = "layer_norm " + dt_name(dt) + " " + dims(shape);
      const int64_t h = shape.back();
      Buf x(dt, shape), w(dt, {h}), b(dt, {h}), y(dt, shape);
      auto xv = x.set(uniform(x.elements(), 2, 4, 16));  // mean 3: a variance from a shift
      auto wv = w.set(uniform(h, -1, 1, 17));
      auto bv = b.set(uniform(h, -1, 1, 18));
      prepare_and_run("layer_norm", make_op(SY_OP_LAYER_NORM, {&x, &w, &b}, {&y}), {&x, &w, &b},
                      {&y});
      std::vector<double> ref(xv.size());
      for (size_t r = 0; r < xv.size() / h; ++r) {
        double mean = 0, var = 0;
        for (int64_t i = 0; i < h; ++i) mean += xv[r * h + i];
        mean /= h;
        for (int64_t i = 0; i < h; ++i) var += (xv[r * h + i] - mean) * (xv[r * h + i] - mean);
        double inv = 1 / std::sqrt(var / h + 1e-5);  // the default eps
        for (int64_t i = 0; i < h; ++i)
          ref[r * h + i] = (xv[r * h + i] - mean) * inv * wv[i] + bv[i];
      }
      // bf16: x̂ amplifies x's input rounding? No: the reference uses the stored x.
      expect_close(y.get(), ref, tol_for(dt), what);
    }
}

// --- rope ----------------------------------------------------------------------------

// Without `table`, frequencies θ^(−2i/R); with it, table[i]. cos and sin times `factor`.
std::vector<double> rope_reference(const std::vector<double>& x, const std::vector<double>& pos,
                                   int64_t rows, int64_t heads, int64_t d, int64_t rot,
                                   bool interleaved, double theta,
                                   const std::vector<double>& table = {}, double factor = 1.0) {
  std::vector<double> y = x;
  const int64_t half = rot / 2;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < heads; ++h) {
      const double* xh = &x[(r * heads + h) * d];
      double* yh = &y[(r * heads + h) * d];
      for (int64_t i = 0; i < half; ++i) {
        double freq = table.empty() ? std::pow(theta, -2.0 * i / rot) : table[size_t(i)];
        double angle = pos[r] * freq;
        double c = factor * std::cos(angle), s = factor * std::sin(angle);
        int64_t i0 = interleaved ? 2 * i : i, i1 = interleaved ? 2 * i + 1 : i + half;
        yh[i0] = xh[i0] * c - xh[i1] * s;
        yh[i1] = xh[i1] * c + xh[i0] * s;
      }
    }
  return y;
}

TEST_P(CpuOpsTier, RopeNeoxInterleavedPartialMatchReference) {
  struct Geometry {
    int64_t d, rotary;
  };
  const Geometry geometries[] = {{64, 64}, {64, 32}, {80, 24}, {6, 6}, {96, 94}};
  for (sy_dtype dt : kFloatTypes)
    for (const char* style : {"neox", "interleaved"})
      for (const Geometry& g : geometries)
        for (sy_dtype pos_dt : {SY_DTYPE_I32, SY_DTYPE_I64}) {
          const int64_t b = 2, s = 5, h = 3;
          std::string what = std::string("rope ") + style + " " + dt_name(dt) +
                             " D=" + std::to_string(g.d) + " rotary=" + std::to_string(g.rotary) +
                             " positions " + dt_name(pos_dt);
          Buf x(dt, {b, s, h, g.d}), pos(pos_dt, {b, s}), y(dt, {b, s, h, g.d});
          auto xv = x.set(uniform(x.elements(), -2, 2, 19));
          std::vector<double> p = uniform(b * s, 0, 4096, 20);
          for (auto& e : p) e = std::floor(e);
          p[3] = 131071;  // a long context: angles must not lose precision
          p[4] = 0;
          auto pv = pos.set(p);
          const double theta = g.d == 80 ? 1e6 : 10000;
          OpDesc op = make_op(SY_OP_ROPE, {&x, &pos}, {&y});
          op.set(SY_ATTR_ROPE_STYLE, std::string(style));
          if (g.rotary != g.d) op.set(SY_ATTR_ROTARY_DIM, g.rotary);
          if (theta != 10000) op.set(SY_ATTR_ROPE_THETA, theta);
          prepare_and_run("rope", op, {&x, &pos}, {&y});
          auto ref = rope_reference(xv, pv, b * s, h, g.d, g.rotary,
                                    std::string(style) == "interleaved", theta);
          expect_close(y.get(), ref, tol_for(dt), what);
        }
}

TEST_P(CpuOpsTier, RopeInPlaceLargeBatch) {
  const int64_t b = 3, s = 300, h = 8, d = 64;  // large enough for the parallel path
  Buf x(SY_DTYPE_F32, {b, s, h, d}), pos(SY_DTYPE_I64, {b, s});
  auto xv = x.set(uniform(x.elements(), -1, 1, 21));
  std::vector<double> p(b * s);
  for (int64_t i = 0; i < b * s; ++i) p[i] = i % s + 7;
  auto pv = pos.set(p);
  OpDesc op = make_op(SY_OP_ROPE, {&x, &pos}, {&x});
  op.set(SY_ATTR_ROTARY_DIM, int64_t{48});
  prepare_and_run("rope", op, {&x, &pos}, {&x});
  expect_close(x.get(), rope_reference(xv, pv, b * s, h, d, 48, false, 10000), kF32,
               "rope neox partial, y = x");
}

// A scaled rope: the frequency table (input 2, f32 [R/2]) replaces θ^(−2i/R) and the attention
// factor multiplies cos and sin; the table is read at every execute (it is a graph constant
// the executor may fill after prepare).
TEST_P(CpuOpsTier, RopeFrequencyTableAndAttentionFactor) {
  for (sy_dtype dt : kFloatTypes)
    for (const char* style : {"neox", "interleaved"})
      for (int64_t rotary : {int64_t{64}, int64_t{24}}) {
        const int64_t b = 1, s = 6, h = 2, d = 64;
        std::string what = std::string("scaled rope ") + style + " " + dt_name(dt) +
                           " rotary=" + std::to_string(rotary);
        Buf x(dt, {b, s, h, d}), pos(SY_DTYPE_I64, {b, s}), y(dt, {b, s, h, d}),
            table(SY_DTYPE_F32, {rotary / 2});
        auto xv = x.set(uniform(x.elements(), -2, 2, 23));
        auto pv = pos.set({0, 1, 17, 500, 8191, 131071});
        std::vector<double> f(size_t(rotary / 2));
        for (size_t i = 0; i < f.size(); ++i)  // llama3-like: low frequencies divided by 8
          f[i] = std::pow(500000.0, -2.0 * double(i) / double(rotary)) *
                 (i < f.size() / 2 ? 1 : 0.125);
        table.set(std::vector<double>(f.size(), 0.5));  // what prepare sees: not the table
        OpDesc op = make_op(SY_OP_ROPE, {&x, &pos, &table}, {&y});
        op.set(SY_ATTR_ROPE_STYLE, std::string(style));
        op.set(SY_ATTR_ROTARY_DIM, rotary);
        op.set(SY_ATTR_ROPE_ATTENTION_FACTOR, 1.2);
        auto k = prepare("rope", op);
        ASSERT_TRUE(k);
        auto tv = table.set(f);
        ASSERT_EQ(run(*k, {&x, &pos, &table}, {&y}), "") << what;
        auto ref = rope_reference(xv, pv, b * s, h, d, rotary, std::string(style) == "interleaved",
                                  10000, tv, 1.2);
        expect_close(y.get(), ref, tol_for(dt), what);
      }
}

// --- softcap ---------------------------------------------------------------------------

TEST_F(CpuOps, SoftcapIsCapTimesTanhOfXOverCap) {
  for (sy_dtype dt : kFloatTypes)
    for (double cap : {30.0, 5.0}) {
      Buf x(dt, {3, 1000}), y(dt, {3, 1000});
      auto xv = x.set(uniform(x.elements(), -200, 200, 29));
      OpDesc op = make_op(SY_OP_SOFTCAP, {&x}, {&y});
      op.set(SY_ATTR_SOFTCAP, cap);
      prepare_and_run("softcap", op, {&x}, {&y});
      std::vector<double> ref(xv.size());
      for (size_t i = 0; i < ref.size(); ++i) ref[i] = cap * std::tanh(xv[i] / cap);
      expect_close(y.get(), ref, tol_for(dt), std::string("softcap ") + dt_name(dt));
    }
}

// --- slice ---------------------------------------------------------------------------

// y = x[..., start : start + n, ...]: every element compared with its index in x, for each
// axis, dtype and a cut at either end.
TEST_F(CpuOps, SliceKeepsTheRangeOfOneAxis) {
  const std::vector<int64_t> shape = {3, 5, 4};
  for (sy_dtype dt : {SY_DTYPE_F32, SY_DTYPE_BF16, SY_DTYPE_I64})
    for (int64_t axis = 0; axis < 3; ++axis)
      for (int64_t start : {int64_t(0), shape[size_t(axis)] - 2}) {
        Buf x(dt, shape);
        std::vector<double> v(size_t(x.elements()));
        for (size_t i = 0; i < v.size(); ++i) v[i] = double(i);  // exact in bf16 below 256
        x.set(v);
        std::vector<int64_t> out = shape;
        out[size_t(axis)] = 2;
        Buf y(dt, out);
        OpDesc op = make_op(SY_OP_SLICE, {&x}, {&y});
        op.set(SY_ATTR_AXIS, axis);
        op.set(SY_ATTR_START, start);
        prepare_and_run("slice", op, {&x}, {&y});
        std::vector<double> got = y.get();
        size_t at = 0;
        for (int64_t a = 0; a < out[0]; ++a)
          for (int64_t b = 0; b < out[1]; ++b)
            for (int64_t c = 0; c < out[2]; ++c) {
              int64_t idx[3] = {a, b, c};
              idx[axis] += start;
              ASSERT_EQ(got[at++], double((idx[0] * shape[1] + idx[1]) * shape[2] + idx[2]))
                  << dt_name(dt) << " axis " << axis << " start " << start;
            }
      }
}

TEST_F(CpuOps, SliceOutsideTheAxisOrWithABadShapeIsRefusedByName) {
  Buf x(SY_DTYPE_F32, {2, 6, 4}), y(SY_DTYPE_F32, {2, 3, 4}), wrong(SY_DTYPE_F32, {2, 3, 5});
  auto refused = [&](Buf& out, int64_t axis, int64_t start, const std::string& constraint) {
    OpDesc op = make_op(SY_OP_SLICE, {&x}, {&out});
    op.set(SY_ATTR_AXIS, axis);
    op.set(SY_ATTR_START, start);
    CheckResult r = check("slice", op);
    EXPECT_FALSE(r.accepted) << "axis " << axis << " start " << start;
    bool named = false;
    for (const auto& f : r.refusals) named = named || f.constraint == constraint;
    EXPECT_TRUE(named) << constraint << " for axis " << axis << " start " << start;
  };
  refused(y, 1, 4, "attribute");   // [4, 7) is past the axis' 6
  refused(y, 1, -1, "attribute");  // start missing or negative
  refused(y, 3, 0, "attribute");   // no such axis
  refused(wrong, 1, 0, "shape_match");
  OpDesc ok = make_op(SY_OP_SLICE, {&x}, {&y});
  ok.set(SY_ATTR_AXIS, int64_t{1});
  ok.set(SY_ATTR_START, int64_t{3});
  EXPECT_TRUE(check("slice", ok).accepted);
}

// --- embedding -----------------------------------------------------------------------

TEST_F(CpuOps, EmbeddingGathersRows) {
  const int64_t v = 1000, h = 129;
  for (sy_dtype dt : kFloatTypes)
    for (sy_dtype id_dt : {SY_DTYPE_I32, SY_DTYPE_I64})
      for (const std::vector<int64_t>& id_shape :
           {std::vector<int64_t>{2, 7}, std::vector<int64_t>{300}}) {
        std::string what =
            "embedding " + dt_name(dt) + " ids " + dt_name(id_dt) + " " + dims(id_shape);
        Buf table(dt, {v, h}), ids(id_dt, id_shape);
        std::vector<int64_t> out_shape = id_shape;
        out_shape.push_back(h);
        Buf rows(dt, out_shape);
        auto tv = table.set(uniform(v * h, -1, 1, 22));
        std::vector<double> idv = uniform(ids.elements(), 0, v, 23);
        for (auto& e : idv) e = std::floor(e);
        idv[0] = 0;
        idv[1] = v - 1;
        ids.set(idv);
        prepare_and_run("embedding", make_op(SY_OP_EMBEDDING, {&table, &ids}, {&rows}),
                        {&table, &ids}, {&rows});
        std::vector<double> ref;
        for (double id : idv)
          for (int64_t j = 0; j < h; ++j) ref.push_back(tv[int64_t(id) * h + j]);
        expect_close(rows.get(), ref, kExact, what);
      }
}

TEST_F(CpuOps, EmbeddingIdOutsideTableIsInvalidArgument) {
  Buf table(SY_DTYPE_F32, {10, 4}), ids(SY_DTYPE_I64, {3}), rows(SY_DTYPE_F32, {3, 4});
  table.set(uniform(40, -1, 1, 24));
  auto k = prepare("embedding", make_op(SY_OP_EMBEDDING, {&table, &ids}, {&rows}));
  ASSERT_TRUE(k);
  for (double bad : {10.0, -1.0}) {
    ids.set({1, bad, 2});
    rows.set(std::vector<double>(12, 7.0));
    std::string err = run(*k, {&table, &ids}, {&rows});
    EXPECT_TRUE(starts_with(err, "INVALID_ARGUMENT")) << err;
    EXPECT_TRUE(contains(err, "id " + std::to_string(int64_t(bad)))) << err;
    EXPECT_TRUE(contains(err, "[0, 10)")) << err;
    EXPECT_EQ(rows.get(), std::vector<double>(12, 7.0)) << "nothing written";
  }
}

// --- kv cache ------------------------------------------------------------------------

TEST_F(CpuOps, KvCacheAppendWritesRowsInPlace) {
  const int64_t b = 2, t = 3, hkv = 4, d = 80, c = 17;
  for (sy_dtype dt : kFloatTypes) {
    Buf rows(dt, {b, t, hkv, d}), pos(SY_DTYPE_I64, {1}), cache(dt, {b, c, hkv, d});
    auto k = prepare("kv_cache_append", make_op(SY_OP_KV_CACHE_APPEND, {&rows, &pos}, {&cache}));
    ASSERT_TRUE(k);
    std::vector<double> expect = cache.set(uniform(cache.elements(), 100, 200, 25));
    for (int64_t p : {int64_t{0}, int64_t{5}, c - t}) {
      auto rv = rows.set(uniform(rows.elements(), -1, 1, unsigned(26 + p)));
      pos.set({double(p)});
      ASSERT_EQ(run(*k, {&rows, &pos}, {&cache}), "") << "position " << p;
      const int64_t row = hkv * d;
      for (int64_t bi = 0; bi < b; ++bi)
        for (int64_t ti = 0; ti < t; ++ti)
          for (int64_t j = 0; j < row; ++j)
            expect[(bi * c + p + ti) * row + j] = rv[(bi * t + ti) * row + j];
      expect_close(cache.get(), expect, kExact,
                   "kv_cache_append " + dt_name(dt) + " position " + std::to_string(p));
    }
  }
}

TEST_F(CpuOps, KvCacheOverflowAndNegativePositionAreInvalidArgument) {
  Buf rows(SY_DTYPE_F32, {1, 3, 2, 16}), pos(SY_DTYPE_I64, {1}),
      cache(SY_DTYPE_F32, {1, 17, 2, 16});
  auto k = prepare("kv_cache_append", make_op(SY_OP_KV_CACHE_APPEND, {&rows, &pos}, {&cache}));
  ASSERT_TRUE(k);
  rows.set(uniform(rows.elements(), -1, 1, 27));
  auto before = cache.set(uniform(cache.elements(), 5, 6, 28));

  pos.set({15});  // 15 + 3 > 17
  std::string err = run(*k, {&rows, &pos}, {&cache});
  EXPECT_TRUE(starts_with(err, "INVALID_ARGUMENT")) << err;
  EXPECT_TRUE(contains(err, "position 15")) << err;
  EXPECT_TRUE(contains(err, "capacity of 17")) << err;
  EXPECT_TRUE(contains(err, "3 new rows")) << err;

  pos.set({-1});
  err = run(*k, {&rows, &pos}, {&cache});
  EXPECT_TRUE(starts_with(err, "INVALID_ARGUMENT")) << err;
  EXPECT_TRUE(contains(err, "position -1")) << err;
  EXPECT_TRUE(contains(err, "negative")) << err;

  pos.set({double(std::numeric_limits<int32_t>::max())});  // huge, no overflow in the check
  err = run(*k, {&rows, &pos}, {&cache});
  EXPECT_TRUE(starts_with(err, "INVALID_ARGUMENT")) << err;
  EXPECT_EQ(cache.get(), before) << "a refused append writes nothing";
}

// --- matmul --------------------------------------------------------------------------

std::vector<double> matmul_reference(const std::vector<double>& a, const std::vector<double>& b,
                                     int64_t m, int64_t k, int64_t n, bool transpose_b) {
  std::vector<double> c(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += a[i * k + p] * (transpose_b ? b[j * k + p] : b[p * n + j]);
      c[i * n + j] = s;
    }
  return c;
}

TEST_F(CpuOps, MatmulGridMatchesReference) {
  const int64_t n = 67;
  for (sy_dtype dt : kFloatTypes)
    for (int64_t m : {1, 37})
      for (int64_t k : {64, 129, 300})
        for (bool tb : {false, true}) {
          std::string what = "matmul " + dt_name(dt) + " M=" + std::to_string(m) +
                             " K=" + std::to_string(k) + " N=" + std::to_string(n) +
                             (tb ? " transpose_b" : "");
          Buf a(dt, {m, k}), b(dt, tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}),
              c(dt, {m, n});
          auto av = a.set(uniform(a.elements(), -1, 1, unsigned(30 + k)));
          auto bv = b.set(uniform(b.elements(), -1, 1, unsigned(31 + m)));
          OpDesc op = make_op(SY_OP_MATMUL, {&a, &b}, {&c});
          if (tb) op.set(SY_ATTR_TRANSPOSE_B, int64_t{1});
          prepare_and_run("matmul", op, {&a, &b}, {&c});
          expect_close(c.get(), matmul_reference(av, bv, m, k, n, tb), matmul_tol(dt, k), what);
        }
}

TEST_F(CpuOps, MatmulFoldsLeadingDimsIntoM) {
  for (sy_dtype dt : kFloatTypes)
    for (bool tb : {false, true}) {
      const int64_t k = 96, n = 45;
      Buf a(dt, {2, 3, 5, k}), b(dt, tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}),
          c(dt, {2, 3, 5, n});
      auto av = a.set(uniform(a.elements(), -1, 1, 40));
      auto bv = b.set(uniform(b.elements(), -1, 1, 41));
      OpDesc op = make_op(SY_OP_MATMUL, {&a, &b}, {&c});
      op.set(SY_ATTR_TRANSPOSE_B, int64_t{tb ? 1 : 0});
      auto kernel = prepare("matmul", op);
      ASSERT_TRUE(kernel);
      for (int step = 0; step < 2; ++step) {  // one prepared kernel, run twice on new data
        if (step) av = a.set(uniform(a.elements(), -1, 1, 42));
        ASSERT_EQ(run(*kernel, {&a, &b}, {&c}), "");
        expect_close(c.get(), matmul_reference(av, bv, 30, k, n, tb), matmul_tol(dt, k),
                     "matmul [2,3,5,K] " + dt_name(dt) + (tb ? " transpose_b" : "") + " step " +
                         std::to_string(step));
      }
    }
}

// a and c are views: any shapes of M·K and M·N elements (docs/operators.md).
TEST_F(CpuOps, MatmulReadsAndWritesViews) {
  struct Case {
    std::vector<int64_t> a, c;
    int64_t k, n;
  };
  const Case cases[] = {
      {{2, 3, 64}, {2, 3, 4, 16}, 64, 64},  // a q projection writing [B, S, Hq, D]
      {{2, 3, 4, 16}, {2, 3, 48}, 64, 48},  // the output projection reading it
      {{96}, {1, 1, 40}, 96, 40},           // one token as a vector
  };
  for (sy_dtype dt : kFloatTypes)
    for (const Case& c : cases) {
      Buf a(dt, c.a), b(dt, {c.n, c.k}), out(dt, c.c);
      auto av = a.set(uniform(a.elements(), -1, 1, 43));
      auto bv = b.set(uniform(b.elements(), -1, 1, 44));
      OpDesc op = make_op(SY_OP_MATMUL, {&a, &b}, {&out});
      op.set(SY_ATTR_TRANSPOSE_B, int64_t{1});
      prepare_and_run("matmul", op, {&a, &b}, {&out});
      expect_close(out.get(), matmul_reference(av, bv, a.elements() / c.k, c.k, c.n, true),
                   matmul_tol(dt, c.k), "matmul view " + dims(c.a) + " -> " + dims(c.c));
    }
}

// The matmul below at every row count of the skinny path (M <= 8 with b [N, K], gemv.hpp) and
// one past them, K with and without a vector tail, N split across threads or not, and oneDNN's
// path beside it.
TEST_P(CpuOpsTier, MatmulMatchesReferenceAtEveryRowCount) {
  for (sy_dtype dt : kFloatTypes)
    for (int64_t m : {1, 2, 3, 4, 5, 7, 8, 9})
      for (int64_t k : {16, 40, 1000})
        for (int64_t n : {1, 13, 67})
          for (bool tb : {true, false}) {
            if (!tb && m != 1 && m != 8) continue;  // oneDNN's path: covered by the grid above
            std::string what = GetParam() + " matmul " + dt_name(dt) + " M=" + std::to_string(m) +
                               " K=" + std::to_string(k) + " N=" + std::to_string(n) +
                               (tb ? " transpose_b" : "");
            Buf a(dt, {m, k}), b(dt, tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}),
                c(dt, {m, n});
            auto av = a.set(uniform(a.elements(), -1, 1, unsigned(60 + k + m)));
            auto bv = b.set(uniform(b.elements(), -1, 1, unsigned(61 + n)));
            OpDesc op = make_op(SY_OP_MATMUL, {&a, &b}, {&c});
            if (tb) op.set(SY_ATTR_TRANSPOSE_B, int64_t{1});
            prepare_and_run("matmul", op, {&a, &b}, {&c});
            expect_close(c.get(), matmul_reference(av, bv, m, k, n, tb), matmul_tol(dt, k), what);
            if (HasFailure()) return;
          }
}

INSTANTIATE_TEST_SUITE_P(Tiers, CpuOpsTier, ::testing::ValuesIn(test::cpu_tiers()),
                         test::tier_test_name);

// --- bad input through the ABI -------------------------------------------------------

class CpuOpsBadInput : public CpuOps {
 protected:
  void SetUp() override {
    a_ = std::make_unique<Buf>(SY_DTYPE_F32, std::vector<int64_t>{4, 8});
    b_ = std::make_unique<Buf>(SY_DTYPE_F32, std::vector<int64_t>{8});
    c_ = std::make_unique<Buf>(SY_DTYPE_F32, std::vector<int64_t>{4, 8});
    a_->set(uniform(32, -1, 1, 50));
    b_->set(uniform(8, -1, 1, 51));
    op_ = make_op(SY_OP_ADD, {a_.get(), b_.get()}, {c_.get()});
    kernel_ = prepare("add", op_);
    ASSERT_TRUE(kernel_);
  }
  std::string run_add(const DLTensor& a) {
    const DLTensor* in[] = {&a, b_->dl()};
    const DLTensor* out[] = {c_->dl()};
    return test::why(kernel_->execute(in, out));
  }
  std::unique_ptr<Buf> a_, b_, c_;
  OpDesc op_;
  std::unique_ptr<PreparedKernel> kernel_;
};

TEST_F(CpuOpsBadInput, NullDataPointer) {
  DLTensor a = *a_->dl();
  a.data = nullptr;
  std::string err = run_add(a);
  EXPECT_TRUE(starts_with(err, "INVALID_ARGUMENT")) << err;
  EXPECT_TRUE(contains(err, "NULL")) << err;
}

TEST_F(CpuOpsBadInput, WrongRank) {
  DLTensor a = *a_->dl();
  int64_t flat[] = {32};
  a.ndim = 1;
  a.shape = flat;
  std::string err = run_add(a);
  EXPECT_TRUE(starts_with(err, "INVALID_ARGUMENT")) << err;
  EXPECT_TRUE(contains(err, "rank 1")) << err;
}

TEST_F(CpuOpsBadInput, MismatchedDtype) {
  DLTensor a = *a_->dl();
  a.dtype = sy_dtype_to_dl(SY_DTYPE_BF16);
  std::string err = run_add(a);
  EXPECT_TRUE(starts_with(err, "INVALID_ARGUMENT")) << err;
  EXPECT_TRUE(contains(err, "dtype")) << err;
}

TEST_F(CpuOpsBadInput, NonContiguousStrides) {
  DLTensor a = *a_->dl();
  int64_t strides[] = {1, 4};  // column-major view of [4, 8]
  a.strides = strides;
  std::string err = run_add(a);
  EXPECT_TRUE(starts_with(err, "INVALID_ARGUMENT")) << err;
  EXPECT_TRUE(contains(err, "not compact")) << err;
  int64_t compact[] = {8, 1};  // explicit compact strides are fine
  a.strides = compact;
  EXPECT_EQ(run_add(a), "");
}

TEST_F(CpuOpsBadInput, WrongShape) {
  Buf a(SY_DTYPE_F32, {4, 9});
  std::string err = run_add(*a.dl());
  EXPECT_TRUE(starts_with(err, "INVALID_ARGUMENT")) << err;
  EXPECT_TRUE(contains(err, "dimension 1 is 9")) << err;
}

// The plugin validates too: a host that skips validation still gets INVALID_ARGUMENT.
TEST_F(CpuOpsBadInput, RawExecuteBypassingHostValidation) {
  const sy_plugin_api& api = plugin_->api();
  AbiOpView view(op_);
  sy_prepare_args prep{};
  prep.struct_size = sizeof(prep);
  prep.plugin = plugin_->instance();
  prep.kernel_index = static_cast<uint32_t>(kernel("add"));
  prep.device_index = 0;
  prep.op = view.get();
  ErrorText perr;
  ASSERT_EQ(api.prepare(&prep, perr.buffer()), SY_STATUS_OK) << perr.str();
  ASSERT_NE(prep.kernel, nullptr);

  auto execute = [&](const DLTensor* a, const DLTensor* b, const DLTensor* c, size_t num_inputs,
                     std::string* message) {
    const DLTensor* in[] = {a, b};
    const DLTensor* out[] = {c};
    sy_execute_args args{};
    args.struct_size = sizeof(args);
    args.plugin = plugin_->instance();
    args.kernel = prep.kernel;
    args.inputs = in;
    args.num_inputs = num_inputs;
    args.outputs = out;
    args.num_outputs = 1;
    ErrorText err;
    sy_status s = api.execute(&args, err.buffer());
    *message = err.str();
    return s;
  };
  std::string msg;
  DLTensor a = *a_->dl();
  a.data = nullptr;
  EXPECT_EQ(execute(&a, b_->dl(), c_->dl(), 2, &msg), SY_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(msg, "input 0: data pointer is NULL")) << msg;

  DLTensor c = *c_->dl();
  c.data = nullptr;
  EXPECT_EQ(execute(a_->dl(), b_->dl(), &c, 2, &msg), SY_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(msg, "output 0: data pointer is NULL")) << msg;

  EXPECT_EQ(execute(a_->dl(), nullptr, c_->dl(), 2, &msg), SY_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(msg, "input 1: tensor is NULL")) << msg;

  EXPECT_EQ(execute(a_->dl(), b_->dl(), c_->dl(), 1, &msg), SY_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(msg, "1 inputs")) << msg;

  DLTensor wrong = *b_->dl();
  wrong.dtype = sy_dtype_to_dl(SY_DTYPE_I32);
  EXPECT_EQ(execute(a_->dl(), &wrong, c_->dl(), 2, &msg), SY_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(msg, "dtype")) << msg;

  EXPECT_EQ(execute(a_->dl(), b_->dl(), c_->dl(), 2, &msg), SY_STATUS_OK) << msg;
  api.release(plugin_->instance(), prep.kernel);
}

// --- check agrees with prepare ---------------------------------------------------------

struct Refused {
  std::string kernel;
  OpDesc op;
  std::vector<std::string> constraints;  // every refusal, in order
  std::string text;                      // part of the first refusal's text
};

OpDesc op_of(sy_op_kind kind, std::vector<TensorDesc> in, std::vector<TensorDesc> out) {
  OpDesc op;
  op.op = kind;
  op.inputs = std::move(in);
  op.outputs = std::move(out);
  return op;
}
TensorDesc td(sy_dtype dt, std::vector<int64_t> shape) {
  return {dt, std::move(shape), SY_MEMORY_HOST};
}

std::vector<Refused> refused_ops() {
  const sy_dtype F = SY_DTYPE_F32, B = SY_DTYPE_BF16, I32 = SY_DTYPE_I32, I64 = SY_DTYPE_I64;
  std::vector<Refused> out;
  out.push_back({"matmul",
                 op_of(SY_OP_MATMUL, {td(F, {4, 64}), td(F, {65, 32})}, {td(F, {4, 32})}),
                 {"shape_match"},
                 "256 elements, not a multiple of K=65 (b is [65,32] [K, N]"});
  {
    OpDesc op = op_of(SY_OP_MATMUL, {td(F, {4, 64}), td(F, {32, 65})}, {td(F, {4, 32})});
    op.set(SY_ATTR_TRANSPOSE_B, int64_t{1});
    out.push_back({"matmul", op, {"shape_match"}, "not a multiple of K=65 (b is [32,65] [N, K]"});
  }
  out.push_back({"matmul",
                 op_of(SY_OP_MATMUL, {td(F, {4, 64}), td(B, {64, 32})}, {td(F, {4, 33})}),
                 {"dtype_match", "shape_match"},
                 "b is bf16 but a is f32"});
  out.push_back({"matmul",
                 op_of(SY_OP_MATMUL, {td(F, {4, 64}), td(F, {64, 32})}, {td(F, {4, 33})}),
                 {"shape_match"},
                 "c [4,33] has 132 elements, must have M·N = 4·32"});
  out.push_back({"matmul",
                 op_of(SY_OP_MATMUL, {td(F, {4, 64}), td(F, {2, 64, 32})}, {td(F, {4, 32})}),
                 {"rank"},
                 "b must be [K, N] (rank 2)"});
  {
    OpDesc op = op_of(SY_OP_ROPE, {td(F, {1, 2, 4, 64}), td(I64, {1, 2})}, {td(F, {1, 2, 4, 64})});
    op.set(SY_ATTR_ROTARY_DIM, int64_t{33});
    out.push_back({"rope", op, {"rotary_dim"}, "rotary_dim is 33"});
    op.set(SY_ATTR_ROTARY_DIM, int64_t{66});
    out.push_back({"rope", op, {"rotary_dim"}, "between 2 and the head dim 64"});
    op.set(SY_ATTR_ROTARY_DIM, int64_t{64});
    op.set(SY_ATTR_ROPE_STYLE, std::string("gptj"));
    op.inputs[1].dtype = F;
    out.push_back({"rope", op, {"index_dtype", "attribute"}, "positions must be i32 or i64"});
  }
  {
    OpDesc op = op_of(SY_OP_ROPE, {td(F, {1, 2, 4, 64}), td(I64, {1, 2}), td(B, {31})},
                      {td(F, {1, 2, 4, 64})});
    out.push_back({"rope", op, {"dtype_match", "shape_match"}, "table must be f32, is bf16"});
  }
  {
    OpDesc op = op_of(SY_OP_ROPE, {td(F, {1, 2, 4, 64}), td(I64, {1, 2}), td(F, {32})},
                      {td(F, {1, 2, 4, 64})});
    op.set(SY_ATTR_ROPE_ATTENTION_FACTOR, 0.0);
    out.push_back({"rope", op, {"attribute"}, "rope_attention_factor is 0.000000"});
  }
  {
    OpDesc op = op_of(SY_OP_SOFTCAP, {td(F, {4, 8})}, {td(F, {4, 8})});
    op.set(SY_ATTR_SOFTCAP, -1.0);
    out.push_back({"softcap", op, {"attribute"}, "softcap is -1.000000"});
  }
  out.push_back({"argmax",
                 op_of(SY_OP_ARGMAX, {td(F, {2, 10})}, {td(I32, {2})}),
                 {"dtype_match"},
                 "must be i64"});
  out.push_back({"argmax",
                 op_of(SY_OP_ARGMAX, {td(F, {2, 10})}, {td(I64, {2, 1})}),
                 {"shape_match"},
                 "x's shape without its last axis"});
  out.push_back({"embedding",
                 op_of(SY_OP_EMBEDDING, {td(F, {100, 8}), td(F, {3})}, {td(F, {3, 8})}),
                 {"index_dtype"},
                 "ids must be i32 or i64"});
  out.push_back({"embedding",
                 op_of(SY_OP_EMBEDDING, {td(F, {100, 8}), td(I32, {3})}, {td(F, {3, 9})}),
                 {"shape_match"},
                 "rows is [3,9], must be [3,8]"});
  out.push_back({"add",
                 op_of(SY_OP_ADD, {td(F, {3, 4}), td(F, {3})}, {td(F, {3, 4})}),
                 {"broadcast"},
                 "suffix"});
  out.push_back({"silu_mul",
                 op_of(SY_OP_SILU_MUL, {td(F, {3, 4}), td(F, {4})}, {td(F, {3, 4})}),
                 {"shape_match"},
                 "up is [4], must be [3,4]"});
  out.push_back({"copy",
                 op_of(SY_OP_COPY, {td(I32, {3})}, {td(F, {3})}),
                 {"dtype_match"},
                 "only between f32, f16 and bf16"});  // the operator contract
  out.push_back({"copy",
                 op_of(SY_OP_COPY, {td(F, {3})}, {td(SY_DTYPE_F16, {3})}),
                 {"dtype_match"},
                 "only between f32 and bf16"});  // this plugin's limit: it stores no f16
  {
    OpDesc op = op_of(SY_OP_GELU, {td(F, {3})}, {td(F, {3})});
    op.set(SY_ATTR_GELU_APPROX, std::string("fast"));
    out.push_back({"gelu", op, {"attribute"}, "approximate is \"fast\""});
  }
  out.push_back({"rms_norm",
                 op_of(SY_OP_RMS_NORM, {td(F, {2, 8}), td(F, {7})}, {td(F, {2, 8})}),
                 {"shape_match"},
                 "weight is [7], must be [8]"});
  out.push_back({"layer_norm",
                 op_of(SY_OP_LAYER_NORM, {td(F, {2, 8}), td(F, {8})}, {td(F, {2, 8})}),
                 {"operands"},
                 "x, weight, bias -> y"});
  out.push_back(
      {"kv_cache_append",
       op_of(SY_OP_KV_CACHE_APPEND, {td(F, {1, 2, 4, 16}), td(I32, {1})}, {td(F, {1, 8, 4, 16})}),
       {"position"},
       "i64 tensor of shape [1]"});
  out.push_back(
      {"kv_cache_append",
       op_of(SY_OP_KV_CACHE_APPEND, {td(F, {1, 9, 4, 16}), td(I64, {1})}, {td(F, {1, 8, 2, 16})}),
       {"shape_match", "capacity"},
       "with rows' B, Hkv and D"});
  out.push_back({"softmax",
                 op_of(SY_OP_SOFTMAX, {td(F, {2, 8})}, {td(B, {2, 8})}),
                 {"dtype_match"},
                 "y is bf16 but x is f32"});
  return out;
}

TEST_F(CpuOps, CheckRefusesWhatPrepareRefusesWithEveryReason) {
  for (const Refused& r : refused_ops()) {
    std::string what = r.kernel + " (" + r.text + ")";
    CheckResult c = check(r.kernel, r.op);
    EXPECT_FALSE(c.error) << what << ": " << test::why(c.error);
    EXPECT_FALSE(c.accepted) << what;
    std::vector<std::string> names;
    for (const auto& refusal : c.refusals) {
      names.push_back(refusal.constraint);
      EXPECT_FALSE(refusal.text.empty()) << what;
    }
    EXPECT_EQ(names, r.constraints) << what;
    ASSERT_FALSE(c.refusals.empty()) << what;
    EXPECT_TRUE(contains(c.refusals[0].text, r.text)) << what << ": " << c.refusals[0].text;

    auto p = prepare_kernel(*plugin_, kernel(r.kernel), 0, r.op);
    ASSERT_FALSE(p) << what;
    EXPECT_EQ(p.error().status, SY_STATUS_UNSUPPORTED) << what;
    EXPECT_TRUE(starts_with(p.error().message, "UNSUPPORTED")) << p.error().message;
    EXPECT_TRUE(contains(p.error().message, r.text)) << what << ": " << p.error().message;
  }
}

TEST_F(CpuOps, CheckAcceptsWhatPrepareServes) {
  const sy_dtype F = SY_DTYPE_F32, B = SY_DTYPE_BF16, I64 = SY_DTYPE_I64;
  std::vector<std::pair<std::string, OpDesc>> ok;
  OpDesc mm = op_of(SY_OP_MATMUL, {td(B, {2, 3, 64}), td(B, {32, 64})}, {td(B, {2, 3, 32})});
  mm.set(SY_ATTR_TRANSPOSE_B, int64_t{1});
  ok.emplace_back("matmul", mm);
  OpDesc rope = op_of(SY_OP_ROPE, {td(F, {1, 2, 4, 80}), td(I64, {1, 2})}, {td(F, {1, 2, 4, 80})});
  rope.set(SY_ATTR_ROTARY_DIM, int64_t{40});
  rope.set(SY_ATTR_ROPE_STYLE, std::string("interleaved"));
  ok.emplace_back("rope", rope);
  ok.emplace_back("copy", op_of(SY_OP_COPY, {td(B, {3})}, {td(F, {3})}));
  ok.emplace_back("mul", op_of(SY_OP_MUL, {td(F, {2, 3, 4})}, {td(F, {2, 3, 4})}));
  ok.back().second.inputs.push_back(td(F, {3, 4}));
  ok.emplace_back(
      "kv_cache_append",
      op_of(SY_OP_KV_CACHE_APPEND, {td(B, {1, 1, 2, 16}), td(I64, {1})}, {td(B, {1, 8, 2, 16})}));
  for (const auto& [name, op] : ok) {
    CheckResult c = check(name, op);
    EXPECT_TRUE(c.accepted) << name << ": "
                            << (c.refusals.empty() ? test::why(c.error) : c.refusals[0].text);
    auto p = prepare_kernel(*plugin_, kernel(name), 0, op);
    EXPECT_TRUE(p) << name << ": " << test::why(p);
  }
}

}  // namespace
}  // namespace sy
