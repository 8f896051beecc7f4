// How the weight readers' errors name a metadata key or a tensor: between single quotes, so that
// an empty or space-padded name still shows.
#pragma once

#include <string>

namespace sy {

inline std::string quoted_name(const std::string& name) {
  return "'" + name + "'";
}

}  // namespace sy
