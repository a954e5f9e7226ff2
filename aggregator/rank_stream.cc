#include "aggregator/rank_stream.h"

namespace commprof {

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
  if (!ingest_.ClaimRank(h->rank)) {
    return InvalidArgument("rank " + std::to_string(h->rank) + " (pid " + std::to_string(h->pid) +
                           ") is already connected or stored");
  }
  hello_ = h.value();
  rank_ = hello_.rank;
  accepted_ = true;
  ingest_.OpenRank(hello_);
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
      ingest_.Strings(rank_, std::move(s.value()));
      return Status::Ok();
    }
    case wire::FrameType::kEvents: {
      auto e = wire::DecodeEvents(payload);
      if (!e.ok()) {
        return e.status();
      }
      if (e->batch_seq < next_batch_) {
        return Corrupt("events batch " + std::to_string(e->batch_seq) + " repeats or goes back (expected " +
                       std::to_string(next_batch_) + ")");
      }
      batches_lost_ += e->batch_seq - next_batch_;
      next_batch_ = e->batch_seq + 1;
      ingest_.Events(rank_, std::move(e->events));
      return Status::Ok();
    }
    case wire::FrameType::kClock: {
      auto c = wire::DecodeClock(payload);
      if (!c.ok()) {
        return c.status();
      }
      ingest_.Clock(rank_, std::move(c.value()));
      return Status::Ok();
    }
    case wire::FrameType::kBye: {
      auto b = wire::DecodeBye(payload);
      if (!b.ok()) {
        return b.status();
      }
      counters_ = std::move(b->counters);
      bye_ = true;
      End("bye");
      return Status::Ok();
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
  ingest_.CloseRank(rank_, end, counters_, batches_lost_, reason);
}

}  // namespace commprof
