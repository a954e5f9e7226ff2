// One rank's frame stream, from a socket or a spool file: the same rules for both.
// The first frame must be a hello (checked: HMAC proof when a secret is known, job id, a rank not
// already taken); then strings, events, clock and bye frames in any order. Batch sequence gaps are
// counted as lost batches. Any violation is a Status: the caller drops this stream only.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>

#include "aggregator/ingest.h"
#include "core/wire.h"

namespace commprof {

struct StreamPolicy {
  std::optional<std::string> secret;  // unset: do not check the proof (local spool files)
  std::string job_id;                 // empty: accept any job id
  // A relay's: a hello of an incarnation above 0 (an elastic restart's worker) is refused, whatever
  // ranks this stream's ingest holds (a shard keeps the first incarnation only).
  bool refuse_restarts = false;
};

// Where a rank's stream goes by its hello's incarnation, for the incarnations above 0 (the workers of
// an elastic restart, docs/torchrun.md#elastic-restarts): the Ingest of that incarnation's file, or
// an error that refuses the hello.
using IncarnationRouter = std::function<Result<Ingest*>(uint32_t incarnation)>;

class RankStream {
 public:
  RankStream(Ingest& ingest, StreamPolicy policy) : ingest_(&ingest), policy_(std::move(policy)) {}

  // Unset (a relay, a lone spool merge): every incarnation goes to the ingest given, where a
  // restarted rank is refused as already stored.
  void RouteIncarnations(IncarnationRouter router) { router_ = std::move(router); }
  // The ingest the stream writes to: the one given, or after the hello its incarnation's.
  Ingest& ingest() const { return *ingest_; }

  // Over TCP: the hello's proof must cover this connection's challenge (docs/wire-protocol.md);
  // without this call (spool files) the proof is the nonce-less one.
  void RequireChallenge(const wire::Nonce& nonce) { challenge_ = nonce; }

  Status OnFrame(wire::FrameType type, std::span<const uint8_t> payload);
  // The stream ended (EOF, error, or bye seen); `corrupt` when it ended at a bad frame. Safe to
  // call more than once: the first call decides.
  void End(const std::string& reason, bool corrupt = false);

  // Called with every events batch accepted (before the ingest takes it): the hang watchdog's view
  // of progress. Unset: nothing is called.
  void ObserveEvents(std::function<void(uint32_t rank, std::span<const commprof_event>)> observer) {
    events_observer_ = std::move(observer);
  }

  bool accepted() const { return accepted_; }
  bool said_bye() const { return bye_; }
  // After the bye: how the rank ended by its counters ("bye", or "killed by signal N (SIGx)").
  const std::string& end_reason() const { return end_reason_; }
  uint32_t rank() const { return rank_; }
  // Batches of this rank the stream has seen (acknowledgements may not run ahead of them).
  uint64_t next_batch() const { return next_batch_; }
  bool resumed() const { return resumed_; }
  const wire::Hello& hello() const { return hello_; }
  // What a relay's control connection is held to as well (Session::HandleRelayHello).
  const StreamPolicy& policy() const { return policy_; }
  const std::optional<wire::Nonce>& challenge() const { return challenge_; }

 private:
  Status OnHello(std::span<const uint8_t> payload);

  Ingest* ingest_;
  IncarnationRouter router_;
  StreamPolicy policy_;
  std::optional<wire::Nonce> challenge_;
  bool accepted_ = false;
  bool bye_ = false;
  bool ended_ = false;
  bool resumed_ = false;
  uint32_t rank_ = 0;
  uint64_t generation_ = 0;
  wire::Hello hello_;
  uint64_t next_batch_ = 0;
  uint64_t last_seen_ = 0;  // the stream's own order check: batch_seq goes up strictly
  bool seen_any_ = false;
  uint64_t first_batch_ = 0;  // a fresh stream's first batch_seq, when above 0
  uint64_t batches_lost_ = 0;
  std::vector<std::pair<std::string, uint64_t>> counters_;
  std::string end_reason_;
  std::function<void(uint32_t, std::span<const commprof_event>)> events_observer_;
};

}  // namespace commprof
