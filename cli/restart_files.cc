#include "cli/restart_files.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "core/h5/h5_util.h"
#include "core/schema/file_schema.h"

namespace commprof::cli {

namespace fs = std::filesystem;

std::string RestartFilePath(const std::string& output, uint32_t k) {
  const fs::path p(output);
  const std::string suffix = ".restart-" + std::to_string(k) + ".h5";
  return p.extension() == ".h5" ? (p.parent_path() / p.stem()).string() + suffix : output + suffix;
}

// At a hello of incarnation k > 0 (the io thread, or a spool merge). Bounded: a hello is
// authenticated, but a launcher restarting its workers without end should not fill the disk.
Result<Ingest*> RestartFiles::For(uint32_t k) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = ingests_.find(k); it != ingests_.end()) {
    return it->second.get();
  }
  if (k > kMaxIncarnations) {
    return InvalidArgument("incarnation " + std::to_string(k) + " is above the " + std::to_string(kMaxIncarnations) +
                           " elastic restarts commprof keeps");
  }
  const std::string path = RestartFilePath(output_, k);
  auto ingest = Ingest::Start(path, meta_, writer_, flush_ms_);
  if (!ingest.ok()) {
    std::fprintf(stderr, "%s: error: cannot keep elastic restart %u: %s\n", command_.c_str(), k,
                 ingest.status().message().c_str());
    NoteFailure(path, ingest.status());
    return Status(ingest.status().code(),
                  "the file of incarnation " + std::to_string(k) + " cannot be written: " + ingest.status().message());
  }
  ingest.value()->SetQueueLimit(queue_bytes_);
  ingest.value()->RunOnWriter("the incarnation", [k](hid_t f) {
    return h5::Write(f, schema::root_attr::kIncarnation, uint64_t{k}) ? Status::Ok()
                                                                      : IoError("cannot write the incarnation");
  });
  std::fprintf(stderr, "commprof: elastic restart: incarnation %u of the workers goes to %s\n", k, path.c_str());
  return ingests_.emplace(k, std::move(ingest.value())).first->second.get();
}

void RemoveStaleRestartFiles(const std::string& output, const std::vector<std::string>& kept) {
  const fs::path out(output);
  const fs::path dir = out.parent_path().empty() ? fs::path(".") : out.parent_path();
  const std::string prefix = (out.extension() == ".h5" ? out.stem() : out.filename()).string() + ".restart-";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= prefix.size() + 3 || name.compare(0, prefix.size(), prefix) != 0 ||
        name.compare(name.size() - 3, 3, ".h5") != 0) {
      continue;
    }
    // K as this code writes it: 1 to kMaxIncarnations, no sign, no leading zero.
    const std::string_view digits = std::string_view(name).substr(prefix.size(), name.size() - prefix.size() - 3);
    uint32_t k = 0;
    const auto parsed = std::from_chars(digits.data(), digits.data() + digits.size(), k);
    if (parsed.ec != std::errc() || parsed.ptr != digits.data() + digits.size() || digits.front() == '0' || k == 0 ||
        k > RestartFiles::kMaxIncarnations) {
      continue;
    }
    const std::string path = RestartFilePath(output, k);
    if (std::find(kept.begin(), kept.end(), path) == kept.end() && fs::remove(entry.path(), ec)) {
      std::fprintf(stderr, "commprof: removed %s: an earlier run's elastic restart, not this job's\n",
                   entry.path().c_str());
    }
  }
}

std::set<uint32_t> RestartFiles::RanksDone() {
  std::set<uint32_t> done;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [k, ingest] : ingests_) {
    done.merge(ingest->ranks_done());
  }
  return done;
}

void RestartFiles::NoteFailure(const std::string& path, const Status& st) {
  if (error_.ok()) {
    error_ = Status(st.code(), path + ": " + st.message());
  }
}

Status RestartFiles::error() {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

std::string RestartFiles::Names() {
  std::string names;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [k, ingest] : ingests_) {
    names += (names.empty() ? "" : ",") + fs::path(RestartFilePath(output_, k)).filename().string();
  }
  return names;
}

std::vector<std::string> RestartFiles::Finish(bool analyze) {
  std::map<uint32_t, std::unique_ptr<Ingest>> restarts;
  {
    std::lock_guard<std::mutex> lock(mu_);
    restarts.swap(ingests_);
  }
  std::vector<std::string> paths;
  for (auto& [k, ingest] : restarts) {
    const std::string path = RestartFilePath(output_, k);
    Status st = ingest->Finish();
    const size_t ranks = ingest->ranks_claimed().size();
    const uint64_t events = ingest->events_written();
    ingest.reset();
    if (!st.ok()) {
      std::fprintf(stderr, "%s: error: writing %s: %s\n", command_.c_str(), path.c_str(), st.message().c_str());
      std::lock_guard<std::mutex> lock(mu_);
      NoteFailure(path, st);
    } else {
      std::fprintf(stderr, "commprof: elastic restart %u: %zu rank(s), %llu events in %s\n", k, ranks,
                   static_cast<unsigned long long>(events), path.c_str());
      if (analyze) {
        (void)StoreAnalysis(path, "commprof");
      }
    }
    paths.push_back(path);
  }
  return paths;
}

void NameRestartFiles(Ingest& job, RestartFiles& restarts) {
  if (std::string names = restarts.Names(); !names.empty()) {
    job.RunOnWriter("the restart files", [names = std::move(names)](hid_t f) {
      return h5::Write(f, schema::root_attr::kRestartFiles, names) ? Status::Ok()
                                                                   : IoError("cannot write restart_files");
    });
  }
}

}  // namespace commprof::cli
