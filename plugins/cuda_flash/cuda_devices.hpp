// CUDA device discovery that never fails the plugin: no driver, no device or a too-old
// driver become zero devices and a reason.
#pragma once

#include <string>
#include <vector>

namespace sy::cuda {

struct CudaDevice {
  std::string name;
  std::string arch;  // "sm_90"
  int sm_major = 0, sm_minor = 0;
  unsigned long long memory_bytes = 0;
  int multiprocessors = 0;
  int ordinal = 0;  // the CUDA runtime's device index
};

struct Discovery {
  std::vector<CudaDevice> devices;
  std::string no_devices_reason;  // set when devices is empty
};

Discovery discover_devices();

// "sm_90" -> 90; 0 when not of that form.
int sm_version(const char* arch);

}  // namespace sy::cuda
