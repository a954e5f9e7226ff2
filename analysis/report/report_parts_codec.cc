#include "analysis/report/report_parts_codec.h"

#include "core/part_bytes.h"

namespace commprof {
namespace {

constexpr uint32_t kMagic = 0x50525043;  // "CPRP"
enum class PartKind : uint32_t { kP2P = 1, kRankPasses = 2, kScreening = 3 };

// The record sizes both ends must agree on: a different build is refused, not misread.
constexpr uint64_t kLayout = sizeof(P2PMessage) ^ (sizeof(P2PRankStats) << 8) ^ (sizeof(UnmatchedP2P) << 16) ^
                             (sizeof(DeviceOverlap) << 24) ^ (sizeof(MemoryPoint) << 32) ^
                             (sizeof(RankTimeBuilder::Parts) << 40) ^ (sizeof(TimeBreakdown) << 48);

// The records this file encodes field by field: a field added to one of them changes its size and
// stops the build here, so that it is added to the encoder and decoder below too (else the
// distributed report would carry it as zero).
static_assert(sizeof(P2PMatchResult) == 216, "P2PMatchResult changed: update EncodeP2PPart and DecodeP2PPart");
static_assert(sizeof(RankOverlap) == 104, "RankOverlap changed: update EncodeRankPassPart and DecodeRankPassPart");
static_assert(sizeof(MemorySeries) == 80, "MemorySeries changed: update EncodeRankPassPart and DecodeRankPassPart");

void PutHead(PartWriter& w, PartKind kind, const Status& st) {
  PutPartHead(w, kMagic, static_cast<uint32_t>(kind), kLayout, st);
}

Status Malformed(PartKind kind) {
  const char* what = kind == PartKind::kP2P          ? "point-to-point part"
                     : kind == PartKind::kRankPasses ? "rank passes"
                                                     : "screening";
  return Internal(std::string("distributed report: the ") + what +
                  " from another process is malformed (are all processes the same commprof build?)");
}

// Reads the header; returns the status carried (a failed part), or Malformed.
Status GetHead(PartReader& r, PartKind kind) {
  return GetPartHead(r, kMagic, static_cast<uint32_t>(kind), kLayout, Malformed(kind));
}

}  // namespace

std::string EncodeP2PPart(const Result<P2PMatchResult>& part) {
  PartWriter w;
  PutHead(w, PartKind::kP2P, part.status());
  if (part.ok()) {
    const P2PMatchResult& p = part.value();
    w.Put(p.sends);
    w.Put(p.recvs);
    w.Put(p.proc_null);
    w.Put(p.matched);
    w.Put(p.unmatched_sends);
    w.Put(p.unmatched_recvs);
    w.Put(p.unmatched_sendrecv);
    w.Put(p.unmatched_by_reason);
    w.Put(p.bytes);
    w.Put(p.late_sender_wait_ns);
    w.Put(p.late_receiver_wait_ns);
    w.Put(p.membership_conflicts);
    w.PutVector(p.ranks);
    w.PutVector(p.unmatched);
    w.PutVector(p.worst);
    w.PutVector(p.messages);
  }
  return w.Take();
}

Result<P2PMatchResult> DecodeP2PPart(std::string_view bytes) {
  PartReader r(bytes);
  Status st = GetHead(r, PartKind::kP2P);
  if (!st.ok()) {
    return st;
  }
  P2PMatchResult p;
  const bool ok = r.Get(p.sends) && r.Get(p.recvs) && r.Get(p.proc_null) && r.Get(p.matched) &&
                  r.Get(p.unmatched_sends) && r.Get(p.unmatched_recvs) && r.Get(p.unmatched_sendrecv) &&
                  r.Get(p.unmatched_by_reason) && r.Get(p.bytes) && r.Get(p.late_sender_wait_ns) &&
                  r.Get(p.late_receiver_wait_ns) && r.Get(p.membership_conflicts) && r.GetVector(p.ranks) &&
                  r.GetVector(p.unmatched) && r.GetVector(p.worst) && r.GetVector(p.messages) && r.done();
  if (!ok) {
    return Malformed(PartKind::kP2P);
  }
  return p;
}

std::string EncodeRankPassPart(const Result<IndexedRankPasses>& part) {
  PartWriter w;
  PutHead(w, PartKind::kRankPasses, part.status());
  if (part.ok()) {
    w.Put<uint64_t>(part.value().size());
    for (const auto& [index, pass] : part.value()) {
      w.Put(index);
      const RankOverlap& o = pass.overlap;
      w.Put(o.rank);
      w.Put(o.basis);
      w.Put(o.comm_ns);
      w.Put(o.overlap);
      w.Put(o.exposed_comm_ns);
      w.Put(o.breakdown);
      w.Put(o.incomplete_events);
      w.PutVector(o.devices);
      w.Put(pass.time);
      w.Put<uint64_t>(pass.memory.size());
      for (const MemorySeries& m : pass.memory) {
        w.Put(m.rank);
        w.Put(m.device);
        w.Put(m.memory_kind);
        w.PutVector(m.points);
        w.Put(m.peak_bytes);
        w.Put(m.peak_time_ns);
        w.Put(m.final_bytes);
        w.Put(m.allocs);
        w.Put(m.frees);
        w.Put(m.unmatched_frees);
      }
    }
  }
  return w.Take();
}

Result<IndexedRankPasses> DecodeRankPassPart(std::string_view bytes) {
  PartReader r(bytes);
  Status st = GetHead(r, PartKind::kRankPasses);
  if (!st.ok()) {
    return st;
  }
  IndexedRankPasses out;
  uint64_t n = 0;
  if (!r.Get(n) || n > bytes.size()) {
    return Malformed(PartKind::kRankPasses);
  }
  for (uint64_t i = 0; i < n; ++i) {
    uint32_t index = 0;
    RankPass pass;
    RankOverlap& o = pass.overlap;
    uint64_t series = 0;
    bool ok = r.Get(index) && r.Get(o.rank) && r.Get(o.basis) && r.Get(o.comm_ns) && r.Get(o.overlap) &&
              r.Get(o.exposed_comm_ns) && r.Get(o.breakdown) && r.Get(o.incomplete_events) && r.GetVector(o.devices) &&
              r.Get(pass.time) && r.Get(series) && series <= bytes.size();
    for (uint64_t s = 0; ok && s < series; ++s) {
      MemorySeries m;
      ok = r.Get(m.rank) && r.Get(m.device) && r.Get(m.memory_kind) && r.GetVector(m.points) && r.Get(m.peak_bytes) &&
           r.Get(m.peak_time_ns) && r.Get(m.final_bytes) && r.Get(m.allocs) && r.Get(m.frees) &&
           r.Get(m.unmatched_frees);
      pass.memory.push_back(std::move(m));
    }
    if (!ok) {
      return Malformed(PartKind::kRankPasses);
    }
    out.emplace_back(index, std::move(pass));
  }
  if (!r.done()) {
    return Malformed(PartKind::kRankPasses);
  }
  return out;
}

std::string EncodeScreeningPart(const std::vector<RankFault>& left_out) {
  PartWriter w;
  PutHead(w, PartKind::kScreening, Status::Ok());
  w.Put<uint64_t>(left_out.size());
  for (const RankFault& f : left_out) {
    w.Put<uint32_t>(f.rank.value_or(UINT32_MAX));
    w.PutString(f.message);
  }
  return w.Take();
}

Result<std::vector<RankFault>> DecodeScreeningPart(std::string_view bytes) {
  PartReader r(bytes);
  Status st = GetHead(r, PartKind::kScreening);
  if (!st.ok()) {
    return st;
  }
  uint64_t n = 0;
  if (!r.Get(n) || n > bytes.size()) {
    return Malformed(PartKind::kScreening);
  }
  std::vector<RankFault> out;
  for (uint64_t i = 0; i < n; ++i) {
    uint32_t rank = 0;
    RankFault f;
    if (!r.Get(rank) || !r.GetString(f.message) || rank == UINT32_MAX) {
      return Malformed(PartKind::kScreening);
    }
    f.rank = rank;
    out.push_back(std::move(f));
  }
  if (!r.done()) {
    return Malformed(PartKind::kScreening);
  }
  return out;
}

}  // namespace commprof
