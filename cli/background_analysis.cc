#include "cli/background_analysis.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "cli/collection.h"
#include "cli/commands.h"

namespace commprof::cli {
namespace {

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// A descriptor closed on every path out.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// Copies `in` (of `size` bytes) into `out`: a reflink where the file system shares blocks (btrfs,
// XFS), else copy_file_range (the kernel copies, no round trip through us), else read/write.
Status CopyContents(int in, int out, off_t size, const std::string& to) {
  if (::ioctl(out, FICLONE, in) == 0) {
    return Status::Ok();
  }
  off_t done = 0;
  bool plain = false;
  while (done < size && !plain) {
    ssize_t n = ::copy_file_range(in, nullptr, out, nullptr, static_cast<size_t>(size - done), 0);
    if (n > 0) {
      done += n;
    } else if (n == 0) {
      break;  // the file ended early: the comparison before the rename notices
    } else if (errno == EINTR) {
      continue;
    } else if (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP) {
      plain = true;
    } else {
      return IoError(Errno("cannot copy into " + to));
    }
  }
  if (!plain) {
    return Status::Ok();
  }
  std::vector<char> buf(1 << 20);
  for (;;) {
    ssize_t n = ::pread(in, buf.data(), buf.size(), done);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return IoError(Errno("cannot read the file to copy into " + to));
    }
    if (n == 0) {
      return Status::Ok();
    }
    for (ssize_t w = 0; w < n;) {
      ssize_t m = ::pwrite(out, buf.data() + w, static_cast<size_t>(n - w), done + w);
      if (m < 0 && errno == EINTR) {
        continue;
      }
      if (m < 0) {
        return IoError(Errno("cannot write " + to));
      }
      w += m;
    }
    done += n;
  }
}

bool SameFile(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino && a.st_size == b.st_size &&
         a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec;
}

}  // namespace

bool ParseAnalysisMode(const std::string& text, AnalysisMode& mode) {
  if (text == "now") {
    mode = AnalysisMode::kNow;
  } else if (text == "background") {
    mode = AnalysisMode::kBackground;
  } else if (text == "off") {
    mode = AnalysisMode::kOff;
  } else {
    return false;
  }
  return true;
}

void AddAnalysisOptions(CLI::App* sub, AnalysisOptions& o) {
  sub->add_option("--analysis", o.mode,
                  "when the cross-rank analysis (the file's /analysis group) is stored: now (before the command "
                  "returns), background (the command returns with the job's exit code as soon as the file is "
                  "complete; a detached process adds /analysis to it a moment later, through a copy renamed "
                  "over the file; messages in OUTPUT.analysis.log), or off")
      ->type_name("now|background|off")
      ->capture_default_str();
  sub->add_flag("!--no-analysis", o.analyze,
                "the same as --analysis off (commprof report --save stores the analysis later)");
}

bool ResolveAnalysisMode(const AnalysisOptions& o, AnalysisMode& mode, std::string& error) {
  if (!ParseAnalysisMode(o.mode, mode)) {
    error = "--analysis " + o.mode + ": expected now, background or off";
    return false;
  }
  if (!o.analyze && mode == AnalysisMode::kBackground) {
    error = "--no-analysis and --analysis " + o.mode + " contradict each other";
    return false;
  }
  if (!o.analyze) {
    mode = AnalysisMode::kOff;
  }
  return true;
}

void StoreAnalysisLater(const std::string& output, const CollectionSummary& sum, const char* command) {
  if (!sum.status.ok() || sum.write_failed || sum.previous_kept || sum.ranks == 0) {
    return;
  }
  std::vector<std::string> files{output};
  files.insert(files.end(), sum.restart_files.begin(), sum.restart_files.end());
  auto pid = StartBackgroundAnalysis(files, command);
  if (!pid.ok()) {
    std::fprintf(stderr, "%s: %s; storing the analysis now\n", command, pid.status().message().c_str());
    for (const std::string& f : files) {
      (void)StoreAnalysis(f, command);
    }
    return;
  }
  std::fprintf(stderr,
               "%s: %s is complete; its analysis continues in the background (pid %d) and /analysis appears in "
               "the file when it is done (commprof report works meanwhile; messages go to %s)\n",
               command, files.front().c_str(), static_cast<int>(pid.value()),
               BackgroundAnalysisLog(files.front()).c_str());
}

std::string BackgroundAnalysisLog(const std::string& path) { return path + ".analysis.log"; }

Status StoreAnalysisInCopy(const std::string& path, const char* command) {
  const std::string copy = path + ".analysis-tmp-" + std::to_string(::getpid());
  struct stat copied {};
  {
    Fd in(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (in.get() < 0 || ::fstat(in.get(), &copied) != 0) {
      return IoError(Errno("cannot open " + path));
    }
    (void)::unlink(copy.c_str());  // left by a killed process that had our pid: the name is ours now
    Fd out(::open(copy.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (out.get() < 0) {
      return IoError(Errno("cannot create " + copy));
    }
    Status st = CopyContents(in.get(), out.get(), copied.st_size, copy);
    if (st.ok() && ::fchmod(out.get(), copied.st_mode & 07777) != 0) {
      st = IoError(Errno("cannot set the mode of " + copy));
    }
    if (!st.ok()) {
      ::unlink(copy.c_str());
      return st;
    }
  }
  if (Status st = StoreAnalysisOrSayWhyNot(copy, command, path); !st.ok()) {
    ::unlink(copy.c_str());
    return st;
  }
  {
    Fd done(::open(copy.c_str(), O_RDONLY | O_CLOEXEC));
    if (done.get() < 0 || ::fsync(done.get()) != 0) {
      Status st = IoError(Errno("cannot sync " + copy));
      ::unlink(copy.c_str());
      return st;
    }
  }
  // The file must still be the one copied: a job rerun into the same name meanwhile wins.
  struct stat now {};
  if (::stat(path.c_str(), &now) != 0 || !SameFile(copied, now)) {
    ::unlink(copy.c_str());
    return Unavailable(path + " changed while its analysis ran; it was left as it is (commprof report --save " + path +
                       " stores the analysis)");
  }
  if (::rename(copy.c_str(), path.c_str()) != 0) {
    Status st = IoError(Errno("cannot rename " + copy + " to " + path));
    ::unlink(copy.c_str());
    return st;
  }
  return Status::Ok();
}

Result<pid_t> StartBackgroundAnalysis(const std::vector<std::string>& files, const char* command) {
  if (files.empty()) {
    return InvalidArgument("no file to analyse");
  }
  const std::string log = BackgroundAnalysisLog(files.front());
  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    return IoError(Errno("cannot create " + log));
  }
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    Status st = IoError(Errno("cannot start the background analysis"));
    ::close(log_fd);
    ::unlink(log.c_str());
    return st;
  }
  if (pid > 0) {
    ::close(log_fd);
    return pid;
  }
  // The detached process: its own session (no terminal signals, no hang-up when the shell goes),
  // no descriptor of the command's (a pipe left open would keep `commprof run ... | tee` waiting),
  // and its messages in the log.
  (void)::setsid();
  (void)::prctl(PR_SET_NAME, "commprof-analys", 0, 0, 0);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd >= 0) {
    ::dup2(null_fd, STDIN_FILENO);
  }
  ::dup2(log_fd, STDOUT_FILENO);
  ::dup2(log_fd, STDERR_FILENO);
  CloseDescriptorsAbove2();
  int failed = 0;
  for (const std::string& path : files) {
    try {
      if (Status st = StoreAnalysisInCopy(path, command); !st.ok()) {
        std::fprintf(stderr, "%s: analysis not stored in %s: %s\n", command, path.c_str(), st.message().c_str());
        ++failed;
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: analysis not stored in %s: %s\n", command, path.c_str(), e.what());
      ++failed;
    }
  }
  std::fflush(stderr);
  struct stat s {};
  if (failed == 0 && ::fstat(STDERR_FILENO, &s) == 0 && s.st_size == 0) {
    ::unlink(log.c_str());  // nothing to say
  }
  ::_exit(failed == 0 ? 0 : 1);
}

}  // namespace commprof::cli
