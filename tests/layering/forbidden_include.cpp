// Must NOT compile (tests/CMakeLists.txt builds it per probe and expects "No such file"):
// SY_PROBE_HEADER is a core header of a folder the probe's library does not depend on.
#include SY_PROBE_HEADER

int sy_layering_probe_forbidden() {
  return 0;
}
