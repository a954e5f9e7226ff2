/* commprof public C API: add your own ranges, marks and step boundaries to a profile.
 *
 * Link with -lcommprof (or let `commprof run` LD_PRELOAD libcommprof.so and declare these weak).
 * Every function is cheap (no lock, no allocation, no system call after a string's first use),
 * thread-safe, and never fails loudly: outside a profiled run the calls do nothing. */
#ifndef COMMPROF_COMMPROF_H
#define COMMPROF_COMMPROF_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define COMMPROF_API __attribute__((visibility("default")))

/* Interns `name` and returns its id for the *_id variants; the same text gives the same id. */
COMMPROF_API uint32_t commprof_register_string(const char* name);

/* Open a named range on the calling thread; ranges nest (up to 64 deep; deeper ones are counted
 * as dropped). */
COMMPROF_API void commprof_range_push(const char* name);
COMMPROF_API void commprof_range_push_id(uint32_t name_id);
/* Close the innermost open range of the calling thread (a pop with none open is ignored). */
COMMPROF_API void commprof_range_pop(void);

/* An instantaneous, named mark. */
COMMPROF_API void commprof_mark(const char* name);

/* Step boundary: step `step` begins now (training iteration, time step, ...). */
COMMPROF_API void commprof_step(uint64_t step);

/* Pause and resume recording for the whole process (default: enabled). */
COMMPROF_API void commprof_disable(void);
COMMPROF_API void commprof_enable(void);

/* Push everything recorded so far towards the aggregator now (e.g. before a risky phase). */
COMMPROF_API void commprof_flush(void);

#ifdef __cplusplus
}
#endif

#endif /* COMMPROF_COMMPROF_H */
