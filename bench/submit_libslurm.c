/* bench_submit_libslurm: the bare libslurm submission loop that tfslurmd's
 * POST /experiments and a loop of `sbatch` are compared with.
 *
 * Submits the same batch script COUNT times, one slurm_submit_batch_job()
 * after the other, with the job description filled as tfslurmd's
 * service/slurm/libslurm_client.cc fills it (name, partition, nodes, tasks
 * per node, CPUs per task, memory per CPU, time limit, work dir, output file,
 * environment). Prints one line:
 *   jobs=N seconds=S jobs_per_s=R p50_ms=A p99_ms=B max_ms=C first_job=J last_job=K
 * and, with --latencies FILE, every call's latency in ms, one a line.
 *
 *   bench_submit_libslurm --count 200 --script job.sh --name tfx-x-a1 \
 *     --partition debug --nodes 3 --ntasks-per-node 2 --mem-per-cpu 2000 \
 *     --time 10 --workdir /tmp --output /tmp/%j.out [--env KEY=VALUE]...
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

/* Nearest rank, p in 0..100, of sorted v. */
static double percentile(const double* v, int n, double p) {
  if (n == 0) return 0;
  int rank = (int)(p / 100.0 * n + 0.999999);
  if (rank < 1) rank = 1;
  if (rank > n) rank = n;
  return v[rank - 1];
}

static char* read_file(const char* path) {
  FILE* f = fopen(path, "r");
  if (!f) {
    perror(path);
    exit(2);
  }
  size_t cap = 1 << 16, len = 0;
  char* buf = malloc(cap);
  size_t got;
  while ((got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
    len += got;
    if (len + 1 == cap) buf = realloc(buf, cap *= 2);
  }
  buf[len] = 0;
  fclose(f);
  return buf;
}

int main(int argc, char** argv) {
  int count = 100, nodes = 1, tasks_per_node = 1, cpus_per_task = 1, time_min = 10;
  long mem_per_cpu = 0;
  const char *script_path = NULL, *name = "bench-libslurm", *partition = NULL, *workdir = "/tmp",
             *output = "/dev/null", *latencies = NULL;
  char** env = calloc(argc + 8, sizeof(char*));
  int env_n = 0;
  static struct option opts[] = {
      {"count", required_argument, 0, 'c'},         {"script", required_argument, 0, 's'},
      {"name", required_argument, 0, 'n'},          {"partition", required_argument, 0, 'p'},
      {"nodes", required_argument, 0, 'N'},         {"ntasks-per-node", required_argument, 0, 't'},
      {"cpus-per-task", required_argument, 0, 'C'}, {"mem-per-cpu", required_argument, 0, 'm'},
      {"time", required_argument, 0, 'T'},          {"workdir", required_argument, 0, 'w'},
      {"output", required_argument, 0, 'o'},        {"env", required_argument, 0, 'e'},
      {"latencies", required_argument, 0, 'l'},     {0, 0, 0, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (c) {
      case 'c':
        count = atoi(optarg);
        break;
      case 's':
        script_path = optarg;
        break;
      case 'n':
        name = optarg;
        break;
      case 'p':
        partition = optarg;
        break;
      case 'N':
        nodes = atoi(optarg);
        break;
      case 't':
        tasks_per_node = atoi(optarg);
        break;
      case 'C':
        cpus_per_task = atoi(optarg);
        break;
      case 'm':
        mem_per_cpu = atol(optarg);
        break;
      case 'T':
        time_min = atoi(optarg);
        break;
      case 'w':
        workdir = optarg;
        break;
      case 'o':
        output = optarg;
        break;
      case 'e':
        env[env_n++] = optarg;
        break;
      case 'l':
        latencies = optarg;
        break;
      default:
        fprintf(stderr, "usage: see the comment at the top of bench/submit_libslurm.c\n");
        return 2;
    }
  }
  if (!script_path) {
    fprintf(stderr, "--script FILE is required\n");
    return 2;
  }
  char* script = read_file(script_path);

  slurm_init(NULL);
  double* lat = calloc(count, sizeof(double));
  long first_job = 0, last_job = 0;
  double t0 = now_ms();
  for (int i = 0; i < count; ++i) {
    job_desc_msg_t desc;
    slurm_init_job_desc_msg(&desc);
    desc.name = (char*)name;
    if (partition) desc.partition = (char*)partition;
    desc.script = script;
    desc.work_dir = (char*)workdir;
    desc.std_out = (char*)output;
    desc.environment = env;
    desc.env_size = env_n;
    desc.min_nodes = desc.max_nodes = nodes;
    desc.ntasks_per_node = tasks_per_node;
    desc.num_tasks = nodes * tasks_per_node;
    desc.cpus_per_task = cpus_per_task;
    if (mem_per_cpu) desc.pn_min_memory = (uint64_t)mem_per_cpu | MEM_PER_CPU;
    desc.time_limit = time_min;
    desc.user_id = getuid();
    desc.group_id = getgid();
    submit_response_msg_t* resp = NULL;
    double a = now_ms();
    int rc = slurm_submit_batch_job(&desc, &resp);
    lat[i] = now_ms() - a;
    if (rc != SLURM_SUCCESS) {
      fprintf(stderr, "submission %d refused: %s\n", i, slurm_strerror(slurm_get_errno()));
      return 1;
    }
    if (!first_job) first_job = resp->job_id;
    last_job = resp->job_id;
    slurm_free_submit_response_response_msg(resp);
  }
  double secs = (now_ms() - t0) / 1e3;
  if (latencies) {
    FILE* f = fopen(latencies, "w");
    for (int i = 0; f && i < count; ++i) fprintf(f, "%.3f\n", lat[i]);
    if (!f || fclose(f) != 0) {
      perror(latencies);
      return 1;
    }
  }
  qsort(lat, count, sizeof(double), cmp_double);
  printf(
      "jobs=%d seconds=%.3f jobs_per_s=%.1f p50_ms=%.2f p99_ms=%.2f max_ms=%.2f first_job=%ld "
      "last_job=%ld\n",
      count, secs, count / secs, percentile(lat, count, 50), percentile(lat, count, 99),
      lat[count - 1], first_job, last_job);
  slurm_fini();
  return 0;
}
