#include "core/relay_rendezvous.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/clock.h"
#include "core/publish_file.h"
#include "core/wire.h"

extern char** environ;

namespace commprof {
namespace {

std::string RendezvousDir(const RelayRequest& r) {
  if (!r.rendezvous_dir.empty()) {
    return r.rendezvous_dir;
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string base = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  return base + "/commprof-relays-" + std::to_string(::getuid());
}

constexpr std::string_view kFailed = "failed: ";

// The address file's content once written whole (the relay renames it into place): the address,
// or "failed: WHY" when the relay could not start (the ranks waiting for it fall back at once).
bool ReadAddress(const std::string& path, std::string& address) {
  std::ifstream in(path);
  if (!in) {
    return false;
  }
  std::getline(in, address);
  return !address.empty();
}

Result<std::string> Answer(const std::string& content) {
  if (content.starts_with(kFailed)) {
    return Unavailable("the node's relay could not start: " + content.substr(kFailed.size()));
  }
  return content;
}

// Tells the group's other ranks that the relay is not coming.
void MarkFailed(const std::string& addr_path, const std::string& why) {
  (void)PublishLine(addr_path, std::string(kFailed) + why);
}

// The relay's environment: ours without LD_PRELOAD (the relay must not load the collector).
std::vector<char*> RelayEnvironment(std::vector<std::string>& keep) {
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, "LD_PRELOAD=", 11) != 0) {
      keep.emplace_back(*e);
    }
  }
  std::vector<char*> out;
  out.reserve(keep.size() + 1);
  for (auto& s : keep) {
    out.push_back(s.data());
  }
  out.push_back(nullptr);
  return out;
}

// Starts `commprof relay` in its own session with its output in `log`; its pid.
Result<pid_t> SpawnRelay(const RelayRequest& r, const std::string& shard, const std::string& rendezvous) {
  std::vector<std::string> args = {r.command, "relay", "--parent",     r.parent,
                                   "--shard", shard,   "--rendezvous", rendezvous};
  args.insert(args.end(), r.options.begin(), r.options.end());
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& a : args) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);
  std::vector<std::string> env_keep;
  std::vector<char*> envp = RelayEnvironment(env_keep);
  const std::string log = shard + ".log";
  // Opened here rather than by the spawn, whose failure would read as the command's own.
  // O_EXCL: never another relay's log (the name was chosen free; a race loses, the rank goes direct).
  int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (log_fd < 0) {
    return IoError("cannot write the relay's log " + log + " in the shard directory: " + std::strerror(errno));
  }
  if (log_fd <= 2) {  // a rank with a standard descriptor closed: keep the log clear of 0-2
    const int moved = ::fcntl(log_fd, F_DUPFD_CLOEXEC, 3);
    ::close(log_fd);
    if (moved < 0) {
      return IoError("cannot write the relay's log " + log + ": " + std::strerror(errno));
    }
    log_fd = moved;
  }

  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, log_fd, 1);
  posix_spawn_file_actions_adddup2(&fa, log_fd, 2);
  // Nothing else of the rank's (MPI's sockets and pipes) stays open in the relay.
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  // Its own session (a launcher that kills the rank's process group leaves the relay to finish
  // the shard), no signal blocked or ignored as the calling thread may have them.
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, r.command.c_str(), &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(log_fd);
  if (rc != 0) {
    return Unavailable("cannot start the relay " + r.command + ": " + std::strerror(rc));
  }
  return pid;
}

}  // namespace

std::string SanitizeKey(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 64)) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    out += ok ? c : '_';
  }
  return out.empty() ? std::string("_") : out;
}

std::string RelayJobKey(std::string_view job_id, std::string_view secret, std::string_view parent) {
  // The parent's address is in the digest: a job id and a secret file used again by a later
  // aggregator (`commprof aggregate --job-id J --secret-file F`) must not find this one's relays,
  // nor a failure one of its relays left behind.
  const std::string label = "relay " + std::string(parent);
  auto mac =
      wire::HmacSha256(secret, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(label.data()), label.size()));
  static constexpr char kHex[] = "0123456789abcdef";
  std::string digest;
  for (size_t i = 0; i < 8; ++i) {
    digest += kHex[mac[i] >> 4];
    digest += kHex[mac[i] & 15];
  }
  return SanitizeKey(job_id) + "-" + digest;
}

uint32_t RelayGroup(uint32_t local_index, uint32_t ranks_per_relay) {
  return ranks_per_relay == 0 ? 0 : local_index / ranks_per_relay;
}

bool PublishRelayAddress(const std::string& base, const std::string& address) {
  return PublishLine(base + ".addr", address);
}

void WithdrawRelay(const std::string& base) {
  ::unlink((base + ".addr").c_str());
  ::unlink((base + ".lock").c_str());
}

Result<std::string> FindOrStartRelay(const RelayRequest& r) {
  if (r.command.empty() || r.parent.empty() || r.shard_dir.empty()) {
    return InvalidArgument("relays need the commprof command, the parent's address and a shard directory");
  }
  const std::string dir = RendezvousDir(r);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return IoError("cannot create the relay rendezvous directory " + dir + ": " + std::strerror(errno));
  }
  const std::string base = dir + "/" + r.job_key + "-" + SanitizeKey(r.host_key) + "-" + std::to_string(r.group);
  const std::string addr_path = base + ".addr";
  const uint64_t deadline = SteadyNowNs() + uint64_t{r.timeout_ms} * 1000000ull;
  std::string address;
  if (ReadAddress(addr_path, address)) {
    return Answer(address);
  }
  pid_t child = -1;
  std::string log;
  int fd = ::open((base + ".lock").c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  if (fd >= 0) {
    ::close(fd);
    // `commprof run` makes the shard directory; a job started by hand against `commprof aggregate`
    // (or a Slurm script) may name one that does not exist yet: made here, as `mkdir -p` would.
    std::error_code ec;
    std::filesystem::create_directories(r.shard_dir, ec);
    if (ec) {
      const std::string why = "cannot create the shard directory " + r.shard_dir + ": " + ec.message();
      MarkFailed(addr_path, why);
      return IoError(why);
    }
    // The shard's name: unique per relay, readable (node, group, the starter's pid). A rank whose
    // relay ended while the job runs starts another: "-2", "-3", ... so that the first relay's
    // shard and log stay as they are (they hold the first part of its ranks).
    const std::string stem =
        r.shard_dir + "/" + SanitizeKey(r.host_key) + "-" + std::to_string(r.group) + "-" + std::to_string(::getpid());
    std::string shard = stem + ".h5";
    for (int k = 2; std::filesystem::exists(shard, ec) || std::filesystem::exists(shard + ".log", ec); ++k) {
      shard = stem + "-" + std::to_string(k) + ".h5";
    }
    auto pid = SpawnRelay(r, shard, base);
    if (!pid.ok()) {
      MarkFailed(addr_path, pid.status().message());
      return pid.status();
    }
    child = pid.value();
    log = shard + ".log";
  } else if (errno != EEXIST) {
    return IoError("cannot create " + base + ".lock: " + std::strerror(errno));
  }
  while (SteadyNowNs() < deadline) {
    if (ReadAddress(addr_path, address)) {
      return Answer(address);
    }
    if (child > 0) {
      int status = 0;
      if (::waitpid(child, &status, WNOHANG) == child) {
        std::ostringstream why;
        why << "the relay it started (pid " << child << ") ended "
            << (WIFEXITED(status) ? "with exit code " + std::to_string(WEXITSTATUS(status))
                                  : "by signal " + std::to_string(WTERMSIG(status)))
            << " before listening; its output is in " << log;
        MarkFailed(addr_path, why.str());
        return Unavailable(why.str());
      }
    }
    ::usleep(2000);
  }
  return Unavailable("no relay address in " + addr_path + " within " + std::to_string(r.timeout_ms) + " ms");
}

}  // namespace commprof
