// Detects a plugin whose `check` accepts operators outside its own envelope.
#pragma once

#include <optional>
#include <string>

namespace sy {

class Plugin;

// Asks `check` about operators that each kernel's envelope excludes (a dtype it lacks, a
// feature it lacks, a head dim outside its set) and returns a description of the first
// acceptance, or nullopt when the plugin only ever narrowed.
std::optional<std::string> find_capability_lie(const Plugin& plugin);

}  // namespace sy
