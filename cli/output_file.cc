// The output files of the commands (output_file.h).
#include "cli/output_file.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

namespace commprof::cli {

namespace fs = std::filesystem;

namespace {

// The temporary file being written beside an output, removed when a signal ends the command
// midway (SIGINT, SIGQUIT, SIGHUP, a batch system's SIGTERM, mpirun ending the other processes of
// a distributed command when one failed), so nothing half-written is left beside the output. One
// at a time: no command writes two outputs at once.
char g_partial[4096];
volatile sig_atomic_t g_partial_set = 0;

void RemovePartialAndEnd(int signo) {
  if (g_partial_set != 0) {
    ::unlink(g_partial);
  }
  ::signal(signo, SIG_DFL);
  ::raise(signo);
}

class PartialFileGuard {
 public:
  explicit PartialFileGuard(const std::string& path) {
    if (path.size() >= sizeof g_partial) {
      return;
    }
    std::memcpy(g_partial, path.c_str(), path.size() + 1);
    std::atomic_signal_fence(std::memory_order_seq_cst);  // the whole name before the flag
    g_partial_set = 1;
    for (int signo : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) {
      struct sigaction old {};
      // Only where nothing else handles the signal: `run` forwards it to the job.
      if (::sigaction(signo, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) {
        struct sigaction sa {};
        sa.sa_handler = RemovePartialAndEnd;
        sigemptyset(&sa.sa_mask);
        ::sigaction(signo, &sa, nullptr);
        installed_[count_++] = signo;
      }
    }
  }
  ~PartialFileGuard() {
    for (size_t i = 0; i < count_; ++i) {
      struct sigaction now {};
      // Back to the default only where the handler is still ours (no one took the signal meanwhile).
      if (::sigaction(installed_[i], nullptr, &now) == 0 && now.sa_handler == RemovePartialAndEnd) {
        ::signal(installed_[i], SIG_DFL);
      }
    }
    g_partial_set = 0;
  }
  PartialFileGuard(const PartialFileGuard&) = delete;
  PartialFileGuard& operator=(const PartialFileGuard&) = delete;

 private:
  int installed_[4] = {};
  size_t count_ = 0;
};

}  // namespace

Status CheckOutputTarget(const std::string& out, OutputKind kind) {
  if (out.empty()) {
    return InvalidArgument("the output file name is empty");
  }
  if (out == "-" && kind == OutputKind::kStream) {
    return Status::Ok();
  }
  std::error_code fec;
  fs::file_status st = fs::status(out, fec);  // what a link leads to
  if (fs::is_directory(st)) {
    return IoError("cannot write " + out + ": it is a directory");
  }
  if (kind == OutputKind::kRegularFile && fs::exists(st) && !fs::is_regular_file(st)) {
    return IoError("cannot write " + out + ": it exists and is not a regular file");
  }
  if (kind == OutputKind::kStream && fs::exists(st)) {
    // Written where it is (a device, a FIFO, /dev/stdout, a link, or a file in a directory we
    // may not create in: WriteOutput falls back to writing it in place): it must be writable.
    if (::access(out.c_str(), W_OK) != 0) {
      return IoError("cannot write " + out + ": " + std::strerror(errno));
    }
    return Status::Ok();
  }
  fs::path dir = fs::path(out).parent_path();
  if (dir.empty()) {
    dir = ".";
  }
  fs::file_status dst = fs::status(dir, fec);
  if (!fs::exists(dst)) {
    return IoError("cannot write " + out + ": directory " + dir.string() + " does not exist");
  }
  if (!fs::is_directory(dst)) {
    return IoError("cannot write " + out + ": " + dir.string() + " is not a directory");
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return IoError("cannot write " + out + ": cannot create files in " + dir.string() + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

std::string HdfWritePath(const std::string& output) {
  std::error_code ec;
  return fs::exists(output, ec) ? output + ".tmp-" + std::to_string(::getpid()) : output;
}

Status WriteOutput(const std::string& output, const std::function<Status(std::ostream&)>& write) {
  return WriteOutputFile(output, [&write](std::ostream& out, const std::string&) { return write(out); });
}

Status WriteOutputFile(const std::string& output,
                       const std::function<Status(std::ostream&, const std::string& file)>& write) {
  if (output == "-") {
    Status st = write(std::cout, std::string());
    std::cout.flush();
    if (st.ok() && !std::cout) {
      st = IoError("<stdout>: write failed");
    }
    return st;
  }
  std::error_code ec;
  const auto status = std::filesystem::symlink_status(output, ec);
  bool replace =
      status.type() == std::filesystem::file_type::not_found || status.type() == std::filesystem::file_type::regular;
  std::string target = replace ? output + ".tmp-" + std::to_string(getpid()) : output;
  std::optional<PartialFileGuard> guard;  // from before it exists until it is renamed or removed
  if (replace) {
    guard.emplace(target);
  }
  std::ofstream f(target, std::ios::binary | std::ios::trunc);
  if (!f && replace && status.type() == std::filesystem::file_type::regular && ::access(output.c_str(), W_OK) == 0) {
    // No file can be created beside it (a directory we may not write in), but it can be written:
    // in place, as a plain redirection would, not whole-or-nothing.
    replace = false;
    target = output;
    guard.reset();
    f.open(target, std::ios::binary | std::ios::trunc);
  }
  if (!f) {
    // Name the output asked for (not the temporary file beside it) and why it cannot be made.
    const int why = errno;
    const std::filesystem::path dir = std::filesystem::path(output).parent_path();
    if (!dir.empty() && !std::filesystem::is_directory(dir, ec)) {
      return IoError("cannot create " + output + ": no directory " + dir.string());
    }
    return IoError("cannot create " + output + ": " + std::strerror(why));
  }
  // A file written in place is a regular file only if it was one (else a device, FIFO or link).
  const bool regular = replace || status.type() == std::filesystem::file_type::regular;
  Status st = write(f, regular ? target : std::string());
  f.close();
  if (st.ok() && !f) {
    st = IoError(output + ": write failed (disk full, or past the file-size limit?)");
  }
  if (replace && st.ok()) {
    std::filesystem::rename(target, output, ec);
    if (ec) {
      st = IoError(output + ": cannot rename " + target + " into place: " + ec.message());
    }
  }
  if (replace && !st.ok()) {
    std::filesystem::remove(target, ec);
  }
  return st;
}

}  // namespace commprof::cli
