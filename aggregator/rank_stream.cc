#include "aggregator/rank_stream.h"

#include <algorithm>

namespace commprof {

namespace {
// A bye sent from a fatal-signal handler carries the signal (collector/fatal_signals.h).
std::string ByeReason(const std::vector<std::pair<std::string, uint64_t>>& counters) {
  for (const auto& [name, value] : counters) {
    if (name == "fatal_signal") {
      const char* sig = value == 11   ? " (SIGSEGV)"
                        : value == 7  ? " (SIGBUS)"
                        : value == 6  ? " (SIGABRT)"
                        : value == 15 ? " (SIGTERM)"
                                      : "";
      return "killed by signal " + std::to_string(value) + sig;
    }
  }
  return "bye";
}
}  // namespace

Status RankStream::OnHello(std::span<const uint8_t> payload) {
  if (accepted_) {
    return Corrupt("second hello on one stream");
  }
  auto h = wire::DecodeHello(payload);
  if (!h.ok()) {
    return h.status();
  }
  if (policy_.secret.has_value()) {
    const std::string who =
        "hello from rank " + std::to_string(h->rank) + " (pid " + std::to_string(h->pid) + ", host " + h->host + ")";
    if (!challenge_.has_value()) {
      if (!wire::VerifyHelloProof(payload, *policy_.secret)) {
        return Unauthenticated(who + " has a wrong HMAC proof of the job secret");
      }
    } else if (!wire::VerifyHelloProof(payload, *policy_.secret, *challenge_)) {
      // A proof valid without the nonce is a spool file's hello: someone read the file and
      // replayed it. Anything else is a wrong secret or a hello captured from another connection.
      if (wire::VerifyHelloProof(payload, *policy_.secret)) {
        return Unauthenticated(who + " is replayed: its proof is a spool file's, not signed over this connection's " +
                               "challenge");
      }
      return Unauthenticated(who + " has a wrong HMAC proof of the job secret and this connection's challenge " +
                             "(a wrong secret, or a hello replayed from another connection)");
    }
  }
  if (!policy_.job_id.empty() && h->job_id != policy_.job_id) {
    return Unauthenticated("hello from rank " + std::to_string(h->rank) + " is for job '" + h->job_id +
                           "', not this job '" + policy_.job_id + "'");
  }
  if (h->incarnation > 0 && policy_.refuse_restarts) {
    return InvalidArgument("rank " + std::to_string(h->rank) + " is incarnation " + std::to_string(h->incarnation) +
                           " of an elastic restart, which a relay does not keep (docs/torchrun.md#elastic-restarts)");
  }
  if (h->incarnation > 0 && router_) {
    Result<Ingest*> routed = router_(h->incarnation);
    if (!routed.ok()) {
      return routed.status();
    }
    ingest_ = routed.value();
  }
  RankClaim claim = ingest_->ClaimRank(h.value());
  if (claim.kind == RankClaim::Kind::kTaken) {
    return InvalidArgument(claim.why);
  }
  hello_ = h.value();
  rank_ = hello_.rank;
  generation_ = claim.generation;
  accepted_ = true;
  if (claim.kind == RankClaim::Kind::kNew) {
    ingest_->OpenRank(hello_);
  } else {
    // The same process again (a reconnect, or its spool after a lost connection): what is stored
    // stays, resent batches are skipped by the ingest, and batches counted lost stay counted.
    resumed_ = true;
    next_batch_ = claim.next_batch;
    batches_lost_ = claim.batches_lost;
  }
  return Status::Ok();
}

Status RankStream::OnFrame(wire::FrameType type, std::span<const uint8_t> payload) {
  if (type == wire::FrameType::kHello) {
    return OnHello(payload);
  }
  if (!accepted_) {
    return Unauthenticated(std::string("a ") + wire::FrameTypeName(type) + " frame before the hello");
  }
  if (bye_) {
    return Corrupt(std::string("a ") + wire::FrameTypeName(type) + " frame after the bye");
  }
  switch (type) {
    case wire::FrameType::kStrings: {
      auto s = wire::DecodeStrings(payload);
      if (!s.ok()) {
        return s.status();
      }
      ingest_->Strings(rank_, generation_, std::move(s.value()));
      return Status::Ok();
    }
    case wire::FrameType::kEvents: {
      auto e = wire::DecodeEvents(payload);
      if (!e.ok()) {
        return e.status();
      }
      if (e->batch_seq < last_seen_ || (seen_any_ && e->batch_seq == last_seen_)) {
        return Corrupt("events batch " + std::to_string(e->batch_seq) + " repeats or goes back (expected more than " +
                       std::to_string(last_seen_) + ")");
      }
      if (!seen_any_ && !resumed_ && e->batch_seq > 0) {
        // A fresh stream that starts past batch 0: its collector had those acknowledged by an
        // aggregator before this one (it resends only what was not), so they are in that file.
        first_batch_ = e->batch_seq;
        next_batch_ = e->batch_seq;
      }
      seen_any_ = true;
      last_seen_ = e->batch_seq;
      // A resumed stream starts with the batches its collector had not seen acknowledged: those
      // below next_batch_ are already stored, and are skipped (by the ingest), not counted.
      if (e->batch_seq > next_batch_) {
        batches_lost_ += e->batch_seq - next_batch_;
      }
      next_batch_ = std::max(next_batch_, e->batch_seq + 1);
      if (events_observer_) {
        events_observer_(rank_, e->events);
      }
      ingest_->Events(rank_, generation_, e->batch_seq, std::move(e->events));
      return Status::Ok();
    }
    case wire::FrameType::kClock: {
      auto c = wire::DecodeClock(payload);
      if (!c.ok()) {
        return c.status();
      }
      ingest_->Clock(rank_, generation_, std::move(c.value()));
      return Status::Ok();
    }
    case wire::FrameType::kBye: {
      auto b = wire::DecodeBye(payload);
      if (!b.ok()) {
        return b.status();
      }
      counters_ = std::move(b->counters);
      bye_ = true;
      end_reason_ = ByeReason(counters_);
      End(end_reason_);
      return Status::Ok();
    }
    case wire::FrameType::kHangState: {
      // Answers only a live query (the server takes those before this stream sees them); one in a
      // spool file is checked and has nothing to answer.
      auto h = wire::DecodeHangState(payload);
      return h.ok() ? Status::Ok() : h.status();
    }
    default:
      return Corrupt(std::string("unexpected ") + wire::FrameTypeName(type) + " frame from a collector");
  }
}

void RankStream::End(const std::string& reason, bool corrupt) {
  if (ended_ || !accepted_) {
    return;
  }
  ended_ = true;
  RankEnd end = bye_ ? RankEnd::kComplete : (corrupt ? RankEnd::kCorrupt : RankEnd::kDisconnected);
  if (first_batch_ > 0) {
    counters_.emplace_back("batches_in_other_files", first_batch_);
  }
  ingest_->CloseRank(rank_, generation_, end, counters_, batches_lost_, reason);
}

}  // namespace commprof
