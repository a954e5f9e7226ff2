/* A non-MPI program that uses the public C API; `commprof run -- ./c_api_program` profiles it
 * directly (no launcher). Two threads, nested ranges, marks and steps, known counts. With
 * COMMPROF_TEST_EXIT_CODE=N in its environment it exits N after all that (a worker that fails). */
#include <commprof/commprof.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void spin_us(long us) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  do {
    clock_gettime(CLOCK_MONOTONIC, &b);
  } while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}

static void* worker(void* arg) {
  (void)arg;
  for (int i = 0; i < 10; ++i) {
    commprof_range_push("worker-iter");
    spin_us(50);
    commprof_range_pop();
  }
  return NULL;
}

int main(void) {
  pthread_t t;
  pthread_create(&t, NULL, worker, NULL);
  uint32_t outer = commprof_register_string("outer");
  for (uint64_t step = 0; step < 5; ++step) {
    commprof_step(step);
    commprof_range_push_id(outer);
    commprof_range_push("inner");
    spin_us(100);
    commprof_range_pop();
    commprof_mark("checkpoint");
    commprof_range_pop();
  }
  commprof_disable();
  commprof_mark("invisible"); /* recorded nowhere: recording is off */
  commprof_enable();
  commprof_range_pop(); /* a pop with nothing open is ignored */
  pthread_join(t, NULL);
  printf("c_api_program: done\n");
  const char* code = getenv("COMMPROF_TEST_EXIT_CODE");
  return code != NULL ? atoi(code) : 0;
}
