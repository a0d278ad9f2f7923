#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

// Under AddressSanitizer, an allocation that cannot succeed returns null (which the library turns
// into an out-of-memory Error, as without the sanitizer) instead of aborting the test binary, also
// when ctest is run without scripts/test.sh's ASAN_OPTIONS. ASAN_OPTIONS in the environment still
// override this.
#if defined(__SANITIZE_ADDRESS__)
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }
#endif
