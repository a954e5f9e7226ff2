/* spank_commprof.so: `srun --commprof[=OPTIONS]` (and the same option for sbatch/salloc, whose
 * steps inherit it) profiles a job step with commprof.
 *
 * plugstack.conf:  optional /path/spank_commprof.so commprof=/path/bin/commprof \
 *                      lib=/path/lib/libcommprof.so [nccl_plugin=/path/libnccl-profiler-commprof.so] \
 *                      [output=DIR] [timeout=SECONDS]
 *
 * What it does (docs/slurm.md):
 *  - srun (local context, slurm_spank_local_user_init): unless the environment already names a
 *    job-level aggregator (COMMPROF_AGGREGATOR, e.g. started by the batch script), it starts
 *    `commprof aggregate --expect <tasks of the step>` for the step, writing
 *    <output>/commprof-<jobid>.h5 (step 0) or commprof-<jobid>.<step>.h5, and puts
 *    COMMPROF_AGGREGATOR, COMMPROF_SECRET, COMMPROF_JOB_ID and COMMPROF_SPOOL_DIR into srun's
 *    environment, which srun hands to the tasks. slurm_spank_exit waits for that aggregator.
 *  - every task (remote context, slurm_spank_task_init, before exec): prepends libcommprof.so to
 *    LD_PRELOAD and sets NCCL_PROFILER_PLUGIN, NVTX_INJECTION64_PATH, CUDA_INJECTION64_PATH and
 *    COMMPROF_ACTIVITIES for the sources asked for.
 * Without --commprof nothing is touched. Plain C: Slurm dlsym()s the plugin_* symbols and hooks,
 * and the spank_* functions resolve from the loading process (srun, slurmstepd). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <slurm/spank.h>
#include <stdint.h> /* spank.h does not include it */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

SPANK_PLUGIN(commprof, 1);

/* From plugstack.conf. */
static char g_commprof[PATH_MAX];
static char g_lib[PATH_MAX];
static char g_nccl_plugin[PATH_MAX];
static char g_output[PATH_MAX];
static int g_timeout_s = 600;

/* From --commprof[=OPTIONS]. */
static int g_enabled = 0;
static char g_activities[256] = "all";
static char g_out_override[PATH_MAX];
static int g_nccl_proxy = 0;
/* hang_timeout=S, on_hang=report|abort: the aggregator's hang watchdog (commprof aggregate
 * --hang-timeout/--on-hang, docs/hangs.md); "0" is off. */
static char g_hang_timeout[32] = "0";
/* relay=node|N: COMMPROF_RELAY for the tasks (docs/scale.md#relays); "" for none. */
static char g_relay[16] = "";
static char g_on_hang[16] = "report";

/* The aggregator this srun started, if any. */
static pid_t g_aggregator = -1;

static int OptionCallback(int val, const char* optarg, int remote);

static struct spank_option g_option = {
    "commprof",
    "[OPTIONS]",
    "Profile this step with commprof. OPTIONS (comma-separated): activities=cpu+mpi+nccl+cuda+memory+nvtx "
    "(default all), output=DIR (where commprof-<jobid>.h5 goes), nccl=proxy (NCCL proxy op/step records), "
    "hang_timeout=SECONDS (report a hang after SECONDS without a completed communication call; 0: off), "
    "on_hang=report|abort (after a hang: keep waiting, or end the step), relay=node|N (a relay aggregator per node, "
    "or per N tasks of a node, writing shards the step's file links).",
    2,
    0,
    OptionCallback};

static void Copy(char* dst, size_t n, const char* src) { snprintf(dst, n, "%s", src != NULL ? src : ""); }

/* The range commprof aggregate accepts for --hang-timeout: 0 (off), or 1 to 604800 seconds. Checked
 * here too, so a typo fails srun at once rather than the aggregator after the step started. */
static int ValidHangTimeout(const char* text) {
  char* end = NULL;
  errno = 0;
  double v = strtod(text, &end);
  if (*text == '\0' || end == NULL || *end != '\0' || errno != 0 || v != v) return 0;
  return v == 0 || (v >= 1 && v <= 604800);
}

/* OPTIONS: key=value items separated by commas; activities use '+' between names. */
static int ParseOptions(const char* text) {
  char buf[1024];
  /* With has_arg 2, sbatch/salloc hand a bare --commprof to steps as the string "(null)". */
  if (text == NULL || *text == '\0' || strcmp(text, "(null)") == 0) return 0;
  Copy(buf, sizeof buf, text);
  for (char *save = NULL, *item = strtok_r(buf, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save)) {
    char* eq = strchr(item, '=');
    if (eq == NULL) {
      slurm_error(
          "commprof: --commprof option '%s' is not KEY=VALUE (keys: activities, output, nccl, hang_timeout, "
          "on_hang, relay)",
          item);
      return -1;
    }
    *eq = '\0';
    const char* value = eq + 1;
    if (strcmp(item, "activities") == 0) {
      Copy(g_activities, sizeof g_activities, value);
      for (char* p = g_activities; *p != '\0'; ++p)
        if (*p == '+') *p = ','; /* COMMPROF_ACTIVITIES is comma-separated */
    } else if (strcmp(item, "output") == 0) {
      Copy(g_out_override, sizeof g_out_override, value);
    } else if (strcmp(item, "nccl") == 0 && strcmp(value, "proxy") == 0) {
      g_nccl_proxy = 1;
    } else if (strcmp(item, "hang_timeout") == 0) {
      if (!ValidHangTimeout(value) || strlen(value) >= sizeof g_hang_timeout) {
        slurm_error("commprof: --commprof hang_timeout=%s: expected seconds, 0 (off) or 1 to 604800", value);
        return -1;
      }
      Copy(g_hang_timeout, sizeof g_hang_timeout, value);
    } else if (strcmp(item, "relay") == 0) {
      char* end = NULL;
      unsigned long n = strtoul(value, &end, 10);
      int number = *value >= '1' && *value <= '9' && end != NULL && *end == '\0' && n <= 0xffffffffUL;
      if ((strcmp(value, "node") != 0 && !number) || strlen(value) >= sizeof g_relay) {
        slurm_error("commprof: --commprof relay=%s: expected node or a number of tasks per relay (1 or more)", value);
        return -1;
      }
      Copy(g_relay, sizeof g_relay, value);
    } else if (strcmp(item, "on_hang") == 0) {
      if (strcmp(value, "report") != 0 && strcmp(value, "abort") != 0) {
        slurm_error("commprof: --commprof on_hang=%s: expected report or abort", value);
        return -1;
      }
      Copy(g_on_hang, sizeof g_on_hang, value);
    } else {
      slurm_error(
          "commprof: unknown --commprof option '%s=%s' (keys: activities, output, nccl=proxy, hang_timeout, "
          "on_hang, relay)",
          item, value);
      return -1;
    }
  }
  if (g_relay[0] != '\0' && strcmp(g_hang_timeout, "0") != 0) {
    slurm_error(
        "commprof: --commprof relay and hang_timeout together: the hang watchdog does not reach tasks behind "
        "relays; use one or the other");
    return -1;
  }
  return 0;
}

static int OptionCallback(int val, const char* optarg, int remote) {
  (void)val;
  (void)remote;
  g_enabled = 1;
  return ParseOptions(optarg);
}

static int ParseArgs(int ac, char** av) {
  for (int i = 0; i < ac; ++i) {
    if (strncmp(av[i], "commprof=", 9) == 0) {
      Copy(g_commprof, sizeof g_commprof, av[i] + 9);
    } else if (strncmp(av[i], "lib=", 4) == 0) {
      Copy(g_lib, sizeof g_lib, av[i] + 4);
    } else if (strncmp(av[i], "nccl_plugin=", 12) == 0) {
      Copy(g_nccl_plugin, sizeof g_nccl_plugin, av[i] + 12);
    } else if (strncmp(av[i], "output=", 7) == 0) {
      Copy(g_output, sizeof g_output, av[i] + 7);
    } else if (strncmp(av[i], "timeout=", 8) == 0) {
      g_timeout_s = atoi(av[i] + 8);
    } else {
      slurm_error("commprof: unknown plugstack.conf argument '%s' (commprof=, lib=, nccl_plugin=, output=, timeout=)",
                  av[i]);
      return -1;
    }
  }
  return 0;
}

int slurm_spank_init(spank_t sp, int ac, char** av) {
  if (ParseArgs(ac, av) != 0) return -1;
  /* Registered in every context that sees the option (with spank_option_register, not the static
   * spank_options table). */
  if (spank_option_register(sp, &g_option) != ESPANK_SUCCESS) {
    slurm_error("commprof: cannot register --commprof");
    return -1;
  }
  return 0;
}

static int HasActivity(const char* name) {
  if (strcmp(g_activities, "all") == 0) return 1;
  size_t n = strlen(name);
  for (const char* p = g_activities; (p = strstr(p, name)) != NULL; p += n) {
    int starts = p == g_activities || p[-1] == ',';
    int ends = p[n] == '\0' || p[n] == ',';
    if (starts && ends) return 1;
  }
  return 0;
}

static void RandomHex(char* out, size_t bytes) {
  unsigned char buf[64];
  if (bytes > sizeof buf) bytes = sizeof buf;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  ssize_t got = fd >= 0 ? read(fd, buf, bytes) : -1;
  if (fd >= 0) close(fd);
  if (got != (ssize_t)bytes) { /* a broken system: still unique enough for one job */
    unsigned long long seed = (unsigned long long)time(NULL) ^ ((unsigned long long)getpid() << 32);
    for (size_t i = 0; i < bytes; ++i) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      buf[i] = (unsigned char)(seed >> 56);
    }
  }
  static const char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < bytes; ++i) {
    out[2 * i] = kHex[buf[i] >> 4];
    out[2 * i + 1] = kHex[buf[i] & 15];
  }
  out[2 * bytes] = '\0';
}

static uint32_t ItemOrEnv(spank_t sp, spank_item_t item, const char* env) {
  uint32_t v = 0;
  if (spank_get_item(sp, item, &v) == ESPANK_SUCCESS) return v;
  const char* e = getenv(env);
  return e != NULL ? (uint32_t)strtoul(e, NULL, 10) : 0;
}

/* srun: start the step's aggregator unless the job already has one. */
int slurm_spank_local_user_init(spank_t sp, int ac, char** av) {
  (void)ac;
  (void)av;
  if (!g_enabled || spank_context() != S_CTX_LOCAL) return 0;
  if (getenv("COMMPROF_AGGREGATOR") != NULL) return 0; /* a job-level aggregator (batch script) */
  if (g_commprof[0] == '\0') {
    slurm_error("commprof: plugstack.conf gives no commprof=PATH: cannot start an aggregator for this step");
    return -1;
  }
  uint32_t job = ItemOrEnv(sp, S_JOB_ID, "SLURM_JOB_ID");
  uint32_t step = ItemOrEnv(sp, S_JOB_STEPID, "SLURM_STEP_ID");
  uint32_t tasks = ItemOrEnv(sp, S_JOB_TOTAL_TASK_COUNT, "SLURM_NTASKS");
  if (tasks == 0) tasks = 1;
  /* Sized so no name derived from a PATH_MAX directory can be cut short. */
  char dir[PATH_MAX], out[PATH_MAX + 64], spool[PATH_MAX + 128], addr_file[PATH_MAX + 128], job_id[32], expect[16],
      timeout[16];
  const char* base = g_out_override[0] != '\0' ? g_out_override : g_output;
  if (base[0] == '\0' && getcwd(dir, sizeof dir) == NULL) Copy(dir, sizeof dir, ".");
  if (base[0] != '\0') Copy(dir, sizeof dir, base);
  snprintf(job_id, sizeof job_id, "%u", job);
  if (step == 0) {
    snprintf(out, sizeof out, "%s/commprof-%u.h5", dir, job);
  } else {
    snprintf(out, sizeof out, "%s/commprof-%u.%u.h5", dir, job, step);
  }
  snprintf(spool, sizeof spool, "%s.spool", out);
  snprintf(addr_file, sizeof addr_file, "%s.address", out);
  snprintf(expect, sizeof expect, "%u", tasks);
  snprintf(timeout, sizeof timeout, "%d", g_timeout_s);
  char secret[65];
  RandomHex(secret, 32);
  unlink(addr_file);

  pid_t pid = fork();
  if (pid < 0) {
    slurm_error("commprof: cannot start the aggregator: fork: %s", strerror(errno));
    return -1;
  }
  if (pid == 0) {
    /* srun's threads block signals (a signal thread handles them) and exec keeps the mask and any
     * ignored signal: without this the aggregator could never be stopped with SIGTERM. */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (int sig = 1; sig < NSIG; ++sig) signal(sig, SIG_DFL);
    /* The secret travels in the environment, never on a command line (ps). */
    setenv("COMMPROF_SECRET", secret, 1);
    unsetenv("LD_PRELOAD");
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    execl(g_commprof, g_commprof, "aggregate", "-q", "--expect", expect, "--listen", "0.0.0.0:0", "--job-id", job_id,
          "-o", out, "--spool-dir", spool, "--address-file", addr_file, "--timeout", timeout, "--hang-timeout",
          g_hang_timeout, "--on-hang", g_on_hang, (char*)NULL);
    fprintf(stderr, "commprof: cannot run %s: %s\n", g_commprof, strerror(errno));
    _exit(127);
  }
  g_aggregator = pid;
  /* Wait (bounded) until it listens, then hand its address to the tasks through srun's environment. */
  char address[512] = "";
  for (int i = 0; i < 200 && address[0] == '\0'; ++i) {
    FILE* f = fopen(addr_file, "r");
    if (f != NULL) {
      if (fgets(address, sizeof address, f) == NULL) address[0] = '\0';
      fclose(f);
      address[strcspn(address, "\r\n")] = '\0';
    }
    int status;
    if (address[0] == '\0' && waitpid(pid, &status, WNOHANG) == pid) {
      g_aggregator = -1;
      slurm_error("commprof: the aggregator (%s aggregate) exited before it listened", g_commprof);
      return -1;
    }
    if (address[0] == '\0') usleep(50 * 1000);
  }
  unlink(addr_file);
  if (address[0] == '\0') {
    slurm_error("commprof: the aggregator did not start listening within 10 s");
    kill(pid, SIGTERM);
    return -1;
  }
  setenv("COMMPROF_AGGREGATOR", address, 1);
  setenv("COMMPROF_SECRET", secret, 1);
  setenv("COMMPROF_JOB_ID", job_id, 1);
  setenv("COMMPROF_SPOOL_DIR", spool, 1);
  if (g_relay[0] != '\0') {
    /* The first task of each node starts its relay (commprof relay), which writes a shard here. */
    char shards[PATH_MAX + 128];
    snprintf(shards, sizeof shards, "%s.shards", out);
    if (mkdir(shards, 0755) != 0 && errno != EEXIST) {
      slurm_error("commprof: cannot create %s (%s): relays off, every task connects to the aggregator", shards,
                  strerror(errno));
    } else {
      setenv("COMMPROF_RELAY", g_relay, 1);
      setenv("COMMPROF_RELAY_COMMAND", g_commprof, 1);
      setenv("COMMPROF_SHARD_DIR", shards, 1);
    }
  }
  slurm_info("commprof: profiling job %u step %u (%u tasks) into %s", job, step, tasks, out);
  return 0;
}

/* Each task, just before exec: load the collector and point the loaders at it. */
int slurm_spank_task_init(spank_t sp, int ac, char** av) {
  (void)ac;
  (void)av;
  if (!g_enabled) return 0;
  if (g_lib[0] == '\0') {
    slurm_error("commprof: plugstack.conf gives no lib=PATH (libcommprof.so): the task is not profiled");
    return 0; /* the job runs on */
  }
  char preload[PATH_MAX + 4096 + 2];
  char old[4096] = "";
  if (spank_getenv(sp, "LD_PRELOAD", old, sizeof old) == ESPANK_SUCCESS && old[0] != '\0') {
    snprintf(preload, sizeof preload, "%s:%s", g_lib, old);
  } else {
    Copy(preload, sizeof preload, g_lib);
  }
  spank_setenv(sp, "LD_PRELOAD", preload, 1);
  spank_setenv(sp, "COMMPROF_ACTIVITIES", g_activities, 1);
  if (HasActivity("nccl") && g_nccl_plugin[0] != '\0') spank_setenv(sp, "NCCL_PROFILER_PLUGIN", g_nccl_plugin, 0);
  if (g_nccl_proxy) spank_setenv(sp, "COMMPROF_NCCL_DETAIL", "proxy", 1);
  if (HasActivity("nvtx")) spank_setenv(sp, "NVTX_INJECTION64_PATH", g_lib, 0);
  if (HasActivity("cuda") || HasActivity("memory")) spank_setenv(sp, "CUDA_INJECTION64_PATH", g_lib, 0);
  /* Without a reachable aggregator (srun --export=NONE hides srun's variables) ranks spool. */
  char have[8];
  if (spank_getenv(sp, "COMMPROF_AGGREGATOR", have, sizeof have) != ESPANK_SUCCESS &&
      spank_getenv(sp, "COMMPROF_SPOOL_DIR", have, sizeof have) != ESPANK_SUCCESS) {
    spank_setenv(sp, "COMMPROF_SPOOL_DIR", "commprof-spool", 0);
  }
  return 0;
}

/* srun: the step is over; wait for our aggregator to finalize the file. */
int slurm_spank_exit(spank_t sp, int ac, char** av) {
  (void)sp;
  (void)ac;
  (void)av;
  if (g_aggregator <= 0 || spank_context() != S_CTX_LOCAL) return 0;
  int status = 0;
  /* Every task has exited, so every rank has said bye or died; bounded by --timeout in any case. */
  for (int i = 0; i < (g_timeout_s + 30) * 10; ++i) {
    pid_t r = waitpid(g_aggregator, &status, WNOHANG);
    if (r == g_aggregator) {
      g_aggregator = -1;
      int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      if (rc != 0) slurm_error("commprof: the aggregator ended with exit code %d", rc);
      return 0;
    }
    if (r < 0 && errno != EINTR) break;
    if (i == 50) kill(g_aggregator, SIGTERM); /* 5 s after the step: a rank died without its bye */
    usleep(100 * 1000);
  }
  slurm_error("commprof: the aggregator did not finish");
  return 0;
}
