#include "core/planner/plan_error.hpp"

#include <algorithm>
#include <cctype>

#include "core/capability/vocabulary.hpp"
#include "core/errors/errors.hpp"

namespace sy {
namespace {

bool has(const CandidateReport& c, const std::string& constraint,
         const std::string& required = "") {
  return std::any_of(c.reasons.begin(), c.reasons.end(), [&](const Refusal& r) {
    return r.constraint == constraint && (required.empty() || r.required == required);
  });
}

template <typename Pred>
bool only(const CandidateReport& c, Pred pred) {
  return !c.reasons.empty() && std::all_of(c.reasons.begin(), c.reasons.end(), pred);
}

// The comma list of a refusal's `offered` as a set of names.
std::vector<std::string> names(const std::string& list) {
  std::vector<std::string> out;
  std::string item;
  for (char ch : list + ",") {
    if (ch != ',') {
      item += ch;
    } else if (!item.empty()) {
      out.push_back(item);
      item.clear();
    }
  }
  return out;
}

struct Facts {
  const FailedOp& f;
  bool attention() const { return f.node.op == SY_OP_ATTENTION; }
  bool uses_sinks() const {
    return attention() &&
           (op_desc(f.phase, f.node).required_features() & SY_FEATURE_BIT(SY_FEATURE_SINKS));
  }
  template <typename Pred>
  bool any(Pred pred) const {
    return std::any_of(f.considered.begin(), f.considered.end(),
                       [&](const CandidateReport& c) { return !c.accepted && pred(c); });
  }
};

// A kernel on the op's device whose dtypes are only half precision: the flash-attn envelope.
bool flash_dtype(const Facts& x) {
  return x.attention() && x.any([](const CandidateReport& c) {
    if (has(c, "device_type")) return false;
    for (const auto& r : c.reasons) {
      if (r.constraint != "dtype") continue;
      auto offered = names(r.offered);
      return !offered.empty() && std::all_of(offered.begin(), offered.end(),
                                             [](auto& d) { return d == "f16" || d == "bf16"; });
    }
    return false;
  });
}

// Every allowed attention kernel refuses a CPU device for its device type.
bool flash_no_cpu(const Facts& x) {
  const auto& cs = x.f.considered;
  return x.attention() && !cs.empty() && std::all_of(cs.begin(), cs.end(), [](auto& c) {
           return !c.accepted && has(c, "device_type", "cpu");
         });
}

// A CPU attention kernel that lacks sinks and has no LSE to apply them from.
bool sinks_cpu(const Facts& x) {
  return x.uses_sinks() && x.any([](const CandidateReport& c) {
    if (c.device_type != kDLCPU || has(c, "device_type")) return false;
    for (const auto& r : c.reasons)
      if (r.constraint == "feature" && r.required == "sinks") {
        auto offered = names(r.offered);
        return std::find(offered.begin(), offered.end(), "lse") == offered.end();
      }
    return false;
  });
}

bool fused_residency(const Facts& x) {
  return x.f.node.op == SY_OP_FUSED_DECODE_ATTENTION &&
         x.any([](const CandidateReport& c) { return has(c, "residency"); });
}

bool cache_writer_residency(const Facts& x) {
  return x.f.node.op == SY_OP_KV_CACHE_APPEND &&
         x.any([](const CandidateReport& c) { return has(c, "residency"); });
}

bool gqa_only(const Facts& x) {
  return x.any([](const CandidateReport& c) {
    return only(c, [](const Refusal& r) {
      return (r.constraint == "feature" && r.required == "gqa") || r.constraint == "gqa_ratio";
    });
  });
}

bool device_missing(const Facts& x) {
  return !x.f.missing_device.empty() ||
         x.any([](const CandidateReport& c) { return has(c, "device_available"); });
}

// Without transfers, a candidate that failed only on where its operands are would have been
// legal with a copy.
bool residency_only(const Facts& x) {
  return !x.f.transfers && x.any([](const CandidateReport& c) {
    return only(c, [](const Refusal& r) { return r.constraint == "residency"; });
  });
}

// A candidate that would have served the op but for its conformance state.
bool unverified_only(const Facts& x) {
  return x.any([](const CandidateReport& c) {
    return only(c, [](const Refusal& r) {
      return r.constraint == "verified" || r.constraint == "conformance";
    });
  });
}

struct Rule {
  Errc code;
  bool (*matches)(const Facts&);
};

constexpr Rule kRules[] = {
    {Errc::kernel_unverified, unverified_only},
    {Errc::flash_attn_dtype, flash_dtype},
    {Errc::flash_attn_no_cpu, flash_no_cpu},
    {Errc::sinks_flex_cpu, sinks_cpu},
    {Errc::expected_cpu_storage, fused_residency},
    {Errc::expected_cpu, cache_writer_residency},
    {Errc::kv_repeat, gqa_only},
    {Errc::device_unavailable, device_missing},
    {Errc::transfer_forbidden, residency_only},
};

Errc pick_code(const Facts& x) {
  for (const auto& rule : kRules)
    if (rule.matches(x)) return rule.code;
  return Errc::no_kernel_for_op;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

std::string upper(std::string s) {
  for (auto& ch : s) ch = char(std::toupper(static_cast<unsigned char>(ch)));
  return s;
}

// The catalog message with its placeholders filled from the refusals.
std::string message_of(Errc code, const FailedOp& f) {
  std::string m = error_info(code).message;
  replace_all(m, "{op}", f.node.id + " (" + sy_op_kind_name(f.node.op) + ")");
  replace_all(m, "{device}", f.missing_device.empty() ? "of the policy" : f.missing_device);
  for (const auto& c : f.considered)
    for (const auto& r : c.reasons) {
      if (code == Errc::transfer_forbidden && r.constraint == "residency") {
        replace_all(m, "{value}", "an operand of " + f.node.id);
        replace_all(m, "{from}", r.required);
        replace_all(m, "{to}", r.offered);
      }
      if (code == Errc::flash_attn_dtype && r.constraint == "dtype")
        replace_all(m, "(F32)", "(" + upper(r.required) + ")");
    }
  return m;
}

std::string candidates_text(const FailedOp& f) {
  std::string out = "\n  while planning op '" + f.node.id + "' (" + sy_op_kind_name(f.node.op) +
                    ") of phase " + f.phase.name +
                    (f.pinned.empty() ? "" : ", attention pinned to " + f.pinned) +
                    "\n  candidates:";
  if (f.all.empty()) out += "\n    none: no loaded plugin declares a kernel for this op";
  for (const auto& c : f.all) {
    out += "\n    " + c.plugin + "/" + c.kernel + " [" + c.family + "] on " + c.device + ": ";
    std::string reasons;
    for (const auto& r : c.reasons) reasons += (reasons.empty() ? "" : "; ") + r.text;
    out += c.accepted ? "accepted (not allowed by the policy)" : reasons;
  }
  return out;
}

}  // namespace

Error plan_error(const FailedOp& f, PlanFailure& failure) {
  const Errc code = pick_code(Facts{f});
  failure = {f.phase.name, f.node.id, f.all};
  return Error(code, message_of(code, f) + candidates_text(f) + "\n  fix: " + error_info(code).fix);
}

}  // namespace sy
