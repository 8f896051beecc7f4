// Temporary: factories of kernels not written yet refuse at prepare time.
#include "kernel_factories.hpp"

namespace sy::cpu {
namespace {
[[noreturn]] void not_yet(const char* what) {
  throw sy::edge::StatusError(SY_STATUS_UNSUPPORTED, std::string(what) + " is not implemented yet");
}
}  // namespace

std::unique_ptr<CpuKernel> make_fused_decode(const sy::edge::OpCopy&, const CpuContext&) {
  not_yet("fused_decode_attention");
}
std::unique_ptr<CpuKernel> make_kv_cache_append(const sy::edge::OpCopy&, const CpuContext&) {
  not_yet("kv_cache_append");
}
std::unique_ptr<CpuKernel> make_matmul(const sy::edge::OpCopy&, const CpuContext&) {
  not_yet("matmul");
}
std::unique_ptr<CpuKernel> make_embedding(const sy::edge::OpCopy&, const CpuContext&) {
  not_yet("embedding");
}
std::unique_ptr<CpuKernel> make_rms_norm(const sy::edge::OpCopy&, const CpuContext&) {
  not_yet("rms_norm");
}
std::unique_ptr<CpuKernel> make_layer_norm(const sy::edge::OpCopy&, const CpuContext&) {
  not_yet("layer_norm");
}
std::unique_ptr<CpuKernel> make_rope(const sy::edge::OpCopy&, const CpuContext&) {
  not_yet("rope");
}
std::unique_ptr<CpuKernel> make_unary(const sy::edge::OpCopy&, const CpuContext&) {
  not_yet("unary");
}
std::unique_ptr<CpuKernel> make_binary(const sy::edge::OpCopy&, const CpuContext&) {
  not_yet("binary");
}
std::unique_ptr<CpuKernel> make_softmax(const sy::edge::OpCopy&, const CpuContext&) {
  not_yet("softmax");
}
std::unique_ptr<CpuKernel> make_argmax(const sy::edge::OpCopy&, const CpuContext&) {
  not_yet("argmax");
}
std::unique_ptr<CpuKernel> make_copy(const sy::edge::OpCopy&, const CpuContext&) {
  not_yet("copy");
}
std::unique_ptr<CpuKernel> make_attention(const sy::edge::OpCopy&, const CpuContext&) {
  not_yet("attention");
}

}  // namespace sy::cpu
