/* LD_PRELOAD shim: times the libslurm RPCs a process makes.
 *
 *   BENCH_SLURM_TIMING_LOG=/tmp/rpc.log LD_PRELOAD=.../libbench_slurm_timing.so tfslurmd ...
 *
 * Appends one line per call: "FUNCTION START_NS END_NS TID" (CLOCK_MONOTONIC,
 * the clock bench_http_rate --log uses), for slurm_submit_batch_job,
 * slurm_load_jobs, slurm_load_partitions and slurm_load_node. bench/submit.sh
 * subtracts, per POST, the time spent inside these calls (waiting for
 * slurmctld) from the POST's latency: what is left is tfslurmd's own time.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <slurm/slurm.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static FILE* out;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void record(const char* what, int64_t start, int64_t end) {
  pthread_mutex_lock(&mu);
  if (!out) {
    const char* path = getenv("BENCH_SLURM_TIMING_LOG");
    out = fopen(path ? path : "/dev/null", "a");
    if (out) setvbuf(out, NULL, _IOLBF, 0);
  }
  if (out)
    fprintf(out, "%s %lld %lld %ld\n", what, (long long)start, (long long)end,
            (long)syscall(SYS_gettid));
  pthread_mutex_unlock(&mu);
}

#define REAL(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

int slurm_submit_batch_job(job_desc_msg_t* desc, submit_response_msg_t** resp) {
  static __typeof__(&slurm_submit_batch_job) real;
  if (!real) real = REAL(slurm_submit_batch_job);
  int64_t a = now_ns();
  int rc = real(desc, resp);
  record("slurm_submit_batch_job", a, now_ns());
  return rc;
}

int slurm_load_jobs(time_t update_time, job_info_msg_t** msg, uint16_t show_flags) {
  static __typeof__(&slurm_load_jobs) real;
  if (!real) real = REAL(slurm_load_jobs);
  int64_t a = now_ns();
  int rc = real(update_time, msg, show_flags);
  record("slurm_load_jobs", a, now_ns());
  return rc;
}

int slurm_load_partitions(time_t update_time, partition_info_msg_t** msg, uint16_t show_flags) {
  static __typeof__(&slurm_load_partitions) real;
  if (!real) real = REAL(slurm_load_partitions);
  int64_t a = now_ns();
  int rc = real(update_time, msg, show_flags);
  record("slurm_load_partitions", a, now_ns());
  return rc;
}

int slurm_load_node(time_t update_time, node_info_msg_t** msg, uint16_t show_flags) {
  static __typeof__(&slurm_load_node) real;
  if (!real) real = REAL(slurm_load_node);
  int64_t a = now_ns();
  int rc = real(update_time, msg, show_flags);
  record("slurm_load_node", a, now_ns());
  return rc;
}
