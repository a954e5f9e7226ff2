// Includes the one header named by COMMPROF_PROBE_HEADER (tests/tiers/CMakeLists.txt): compiled as
// a user of a module, it must build for a public header and fail for a private one.
#include COMMPROF_PROBE_HEADER

int commprof_tier_probe = 0;
