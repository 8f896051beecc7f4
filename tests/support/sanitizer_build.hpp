// Whether this test binary (and the switchyard it runs) was built with a sanitizer
// (make test-sanitize: SY_SANITIZER_BUILD from the top-level CMakeLists.txt). A check that cannot
// hold under one (resident memory counts the sanitizer's shadow and quarantine) is skipped
// there with the reason printed; it is never loosened for the normal build.
#pragma once

namespace sy::test {

#ifdef SY_SANITIZER_BUILD
inline constexpr bool kSanitizerBuild = true;
#else
inline constexpr bool kSanitizerBuild = false;
#endif

// Why a resident-memory measurement is skipped under a sanitizer.
inline constexpr const char* kResidentUnderSanitizer =
    "resident memory under a sanitizer counts its shadow memory and its quarantine of freed "
    "blocks, so it does not measure the program (checked in the normal build)";

}  // namespace sy::test
