#include "aggregator/spool_reader.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

namespace commprof {

namespace {
struct File {
  std::FILE* f;
  ~File() {
    if (f != nullptr) {
      std::fclose(f);
    }
  }
};
}  // namespace

Result<wire::Hello> ReadSpoolHello(const std::string& path) {
  File file{std::fopen(path.c_str(), "rbe")};
  if (file.f == nullptr) {
    return IoError(path + ": " + std::strerror(errno));
  }
  wire::FrameHeader h;
  std::vector<uint8_t> payload;
  auto got = wire::ReadFrame(file.f, h, payload);
  if (!got.ok()) {
    return Corrupt(path + ": " + got.status().message());
  }
  if (!got.value() || h.type != wire::FrameType::kHello) {
    return Corrupt(path + ": does not start with a hello frame");
  }
  auto hello = wire::DecodeHello(payload);
  if (!hello.ok()) {
    return Corrupt(path + ": " + hello.status().message());
  }
  return hello;
}

namespace {
// The rank of a spool file of `job_id` that ends with a bye; nothing for anything else.
std::optional<uint32_t> SpoolDoneRank(const std::string& path, const std::string& job_id) {
  File file{std::fopen(path.c_str(), "rbe")};
  if (file.f == nullptr) {
    return std::nullopt;
  }
  wire::FrameHeader h;
  std::vector<uint8_t> payload;
  std::optional<uint32_t> rank;
  for (;;) {
    auto got = wire::ReadFrame(file.f, h, payload);
    if (!got.ok() || !got.value()) {
      return std::nullopt;
    }
    if (!rank.has_value()) {
      auto hello =
          h.type == wire::FrameType::kHello ? wire::DecodeHello(payload) : Result<wire::Hello>(Corrupt("no hello"));
      if (!hello.ok() || hello->job_id != job_id) {
        return std::nullopt;
      }
      rank = hello->rank;
    } else if (h.type == wire::FrameType::kBye) {
      return rank;
    }
  }
}
}  // namespace

std::set<uint32_t> SpooledRanksDone(const std::string& dir, const std::string& job_id, SpoolScanCache& cache) {
  std::set<uint32_t> done;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().extension() != ".cpspool") {
      continue;
    }
    std::string path = entry.path().string();
    uintmax_t size = entry.file_size(ec);
    if (ec) {
      continue;
    }
    auto it = cache.files.find(path);
    if (it == cache.files.end() || it->second.first != size) {
      it = cache.files.insert_or_assign(path, std::make_pair(size, SpoolDoneRank(path, job_id))).first;
    }
    if (it->second.second.has_value()) {
      done.insert(*it->second.second);
    }
  }
  return done;
}

SpoolResult IngestSpoolFile(Ingest& ingest, const std::string& path, const StreamPolicy& policy,
                            const IncarnationRouter& router) {
  SpoolResult out;
  File file{std::fopen(path.c_str(), "rbe")};
  if (file.f == nullptr) {
    out.status = IoError(path + ": " + std::strerror(errno));
    return out;
  }
  RankStream stream(ingest, policy);
  if (router) {
    stream.RouteIncarnations(router);
  }
  bool truncated = false;
  wire::FrameHeader h;
  std::vector<uint8_t> payload;
  for (;;) {
    long offset = std::ftell(file.f);
    auto got = wire::ReadFrame(file.f, h, payload);
    if (!got.ok()) {
      truncated = got.status().code() == StatusCode::kIoError;
      out.status = Status(got.status().code(), path + ": " + got.status().message());
      break;
    }
    if (!got.value()) {
      if (offset == 0) {  // what a rank leaves when even its hello found the disk full
        out.status = IoError(path +
                             ": empty (0 bytes): its rank could not write even its hello there (a full "
                             "disk?); nothing of it to merge");
      }
      break;
    }
    Status st = stream.OnFrame(h.type, payload);
    if (!st.ok()) {
      out.status = Corrupt(path + ": " + std::string(wire::FrameTypeName(h.type)) + " frame at byte " +
                           std::to_string(offset) + ": " + st.message());
      break;
    }
    if (stream.said_bye()) {
      break;
    }
  }
  out.accepted = stream.accepted();
  out.rank = stream.rank();
  out.incarnation = stream.hello().incarnation;
  out.job_id = stream.hello().job_id;
  // A spool cut short (its writer was killed) ends like a lost connection; a bad frame is corrupt.
  stream.End(out.status.ok() ? "end of spool file" : out.status.message(), !out.status.ok() && !truncated);
  return out;
}

}  // namespace commprof
