// The load probe: before the host opens a plugin library, a child process opens it first and
// calls its entry, so a plugin whose initializers or entry kill the process (an instruction
// this CPU lacks: SIGILL; a bad pointer: SIGSEGV) becomes a failed plugin with the signal and a
// hint, instead of taking the host down with it. A library that passed is remembered by its
// SHA-256 and this CPU's identity in the user's cache, so later loads skip the child.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace sy {

struct ProbeFailure {
  std::string reason, hint;
};

struct ProbeOutcome {
  std::optional<ProbeFailure> failure;  // set when the child died or hung
  bool cached = false;                  // a pass remembered from an earlier probe
  double ms = 0;                        // the probe's cost in this process
};

// Opens `library` in a child (dlopen RTLD_NOW, then sy_plugin_entry) and reports a signal that
// killed it or a child that did not finish within `timeout_s`. Any other outcome (the library
// does not open, has no entry, returns NULL) is left to the host's own stages, which say it
// better. `sha256` is the library's digest ("" when unknown: nothing cached).
ProbeOutcome probe_library_load(const std::filesystem::path& library, const std::string& sha256,
                                int timeout_s = 30);

// Where passes are remembered: $SWITCHYARD_CACHE_DIR, else $XDG_CACHE_HOME/switchyard, else
// $HOME/.cache/switchyard (then "probes/"); empty when none can be named.
std::filesystem::path probe_cache_dir();

// A short digest of this CPU (its /proc/cpuinfo model and flags): a pass on one CPU says
// nothing of another that shares the cache (a home folder on a network).
std::string cpu_identity_digest();

}  // namespace sy
