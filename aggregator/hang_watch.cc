#include "aggregator/hang_watch.h"

#include <algorithm>

#include "core/clock.h"
#include "core/log.h"

namespace commprof {

namespace {

bool IsCommunicationKind(uint8_t kind) {
  return kind == COMMPROF_KIND_MPI_COLLECTIVE || kind == COMMPROF_KIND_MPI_P2P || kind == COMMPROF_KIND_MPI_WAIT ||
         kind == COMMPROF_KIND_NCCL_API || kind == COMMPROF_KIND_NCCL_COLLECTIVE;
}

}  // namespace

bool IsCompletedCommunication(const commprof_event& e) {
  return IsCommunicationKind(e.kind) && (e.flags & COMMPROF_FLAG_INCOMPLETE) == 0;
}

HangWatch::HangWatch(boost::asio::io_context& io, HangWatchOptions options, HangHandler handler)
    : options_(options),
      handler_(std::move(handler)),
      watch_timer_(io),
      answer_timer_(io),
      last_progress_(std::chrono::steady_clock::now()) {}

void HangWatch::RankConnected(uint32_t rank, uint32_t world_size, const std::shared_ptr<HangPeer>& peer) {
  if (!enabled() || stopped_) {
    return;
  }
  RankEntry& r = ranks_[rank];
  r.peer = peer;
  r.peer_id = peer.get();
  r.connected = true;
  r.bye = false;
  r.end_reason.clear();
  world_size_ = std::max(world_size_, world_size);
  Progress();
}

void HangWatch::Events(uint32_t /*rank*/, std::span<const commprof_event> events) {
  if (!enabled() || stopped_) {
    return;
  }
  if (std::any_of(events.begin(), events.end(), IsCompletedCommunication)) {
    Progress();
  }
}

void HangWatch::RankEnded(uint32_t rank, const HangPeer* peer, bool bye, const std::string& reason) {
  if (!enabled() || stopped_) {
    return;
  }
  auto it = ranks_.find(rank);
  if (it == ranks_.end() || it->second.peer_id != peer || !it->second.connected) {
    return;
  }
  it->second.connected = false;
  it->second.bye = bye;
  it->second.end_reason = reason;
  it->second.peer.reset();
  if (bye) {
    Progress();
  } else if (phase_ == Phase::kQuerying && AllAnswered()) {
    Decide();  // the last rank we were waiting for is gone
  }
}

void HangWatch::Answer(uint32_t rank, wire::HangState state) {
  if (!enabled() || stopped_) {
    ignored_++;
    return;
  }
  auto it = ranks_.find(rank);
  // Only an answer to the query in flight counts: an old one (a slow rank answering the previous
  // round), an id never sent, or a second answer would mix two moments.
  if (phase_ != Phase::kQuerying || state.query_id != query_id_ || it == ranks_.end() || !it->second.connected ||
      it->second.answered) {
    ignored_++;
    COMMPROF_LOG_DEBUG("rank %u: hang-state for query %llu ignored (current query %llu%s)", rank,
                       static_cast<unsigned long long>(state.query_id), static_cast<unsigned long long>(query_id_),
                       phase_ == Phase::kQuerying ? "" : ", none in flight");
    return;
  }
  it->second.answered = true;
  it->second.state = std::move(state);
  if (AllAnswered()) {
    Decide();
  }
}

void HangWatch::Stop() {
  stopped_ = true;
  watch_timer_.cancel();
  answer_timer_.cancel();
}

void HangWatch::Progress() {
  last_progress_ = std::chrono::steady_clock::now();
  if (phase_ == Phase::kReported) {
    COMMPROF_LOG_INFO("hang watch: progress after the hang report; watching again");
    phase_ = Phase::kWatching;
  }
  if (phase_ == Phase::kWatching) {
    ArmWatch();
  }
}

void HangWatch::ArmWatch() {
  // One pending wait at a time: re-arming replaces it (the cancelled wait sees operation_aborted).
  watch_timer_.expires_at(last_progress_ + options_.timeout);
  watch_timer_.async_wait([self = weak_from_this()](const boost::system::error_code& ec) {
    auto s = self.lock();
    if (!ec && s != nullptr && !s->stopped_) {
      s->OnWatchTimer();
    }
  });
}

void HangWatch::OnWatchTimer() {
  if (phase_ != Phase::kWatching) {
    return;
  }
  if (std::chrono::steady_clock::now() < last_progress_ + options_.timeout) {
    return ArmWatch();  // progress moved the deadline since this wait began
  }
  bool anyone_running = std::any_of(ranks_.begin(), ranks_.end(), [](const auto& kv) { return kv.second.connected; });
  if (!anyone_running) {
    return;  // nothing to ask: progress (a rank connecting) arms the watch again
  }
  SendQuery();
}

void HangWatch::SendQuery() {
  phase_ = Phase::kQuerying;
  ++query_id_;
  queries_++;
  std::vector<uint8_t> frame;
  wire::AppendHangQuery(frame, wire::HangQuery{query_id_, 0});
  for (auto& [rank, r] : ranks_) {
    r.answered = false;
    r.state = wire::HangState{};
    if (auto peer = r.connected ? r.peer.lock() : nullptr; peer != nullptr) {
      peer->SendToRank(frame);
    }
  }
  COMMPROF_LOG_INFO("hang watch: no communication completed for %lld ms; query %llu sent to the connected ranks",
                    static_cast<long long>(options_.timeout.count()), static_cast<unsigned long long>(query_id_));
  answer_timer_.expires_after(options_.answer_wait);
  answer_timer_.async_wait([self = weak_from_this(), id = query_id_](const boost::system::error_code& ec) {
    auto s = self.lock();
    if (!ec && s != nullptr && !s->stopped_ && s->phase_ == Phase::kQuerying && s->query_id_ == id) {
      s->Decide();
    }
  });
}

bool HangWatch::AllAnswered() const {
  return std::all_of(ranks_.begin(), ranks_.end(),
                     [](const auto& kv) { return !kv.second.connected || kv.second.answered; });
}

bool HangWatch::LooksHung() const {
  const auto timeout_ns = static_cast<uint64_t>(std::chrono::nanoseconds(options_.timeout).count());
  bool blocked = false;
  for (const auto& [rank, r] : ranks_) {
    if (!r.answered) {
      continue;
    }
    const wire::HangState& s = r.state;
    // A rank that completed a call within the timeout is moving: the job is not stuck (its batch
    // may simply not have arrived yet).
    if (s.last_completion_ns != 0 && s.local_now_ns >= s.last_completion_ns &&
        s.local_now_ns - s.last_completion_ns < timeout_ns) {
      return false;
    }
    for (const wire::InflightOp& op : s.inflight) {
      if (IsCommunicationKind(op.event.kind) && s.local_now_ns >= op.event.start_ns &&
          s.local_now_ns - op.event.start_ns >= timeout_ns) {
        blocked = true;
      }
    }
  }
  return blocked;
}

void HangWatch::Decide() {
  answer_timer_.cancel();
  if (!LooksHung()) {
    COMMPROF_LOG_INFO("hang watch: query %llu: no rank is blocked past the timeout (a quiet phase); watching again",
                      static_cast<unsigned long long>(query_id_));
    phase_ = Phase::kWatching;
    last_progress_ = std::chrono::steady_clock::now();
    ArmWatch();
    return;
  }
  phase_ = Phase::kReported;
  hang::HangInput input = BuildInput();
  std::string verdict = handler_ ? handler_(input) : std::string("a hang was detected");
  reports_++;  // after the handler: whoever sees the count also sees what the handler did
  if (options_.on_hang == OnHang::kAbort) {
    // Set before the frames go out: the ranks end themselves on it, and whoever sees the job end
    // (commprof run's wait) must already read the abort, or it reports the job's own exit code.
    aborted_.store(true);
    std::vector<uint8_t> frame;
    wire::AppendHangAbort(frame, wire::HangAbort{verdict.empty() ? "a hang was detected" : verdict});
    for (auto& [rank, r] : ranks_) {
      if (auto peer = r.connected ? r.peer.lock() : nullptr; peer != nullptr) {
        peer->SendToRank(frame);
      }
    }
  }
}

hang::HangInput HangWatch::BuildInput() const {
  hang::HangInput in;
  in.world_size = world_size_;
  in.source = "live";
  in.timeout_s = std::chrono::duration<double>(options_.timeout).count();
  in.detected_utc_ns = UtcNowNs();
  for (const auto& [rank, r] : ranks_) {
    hang::RankSnapshot snap;
    snap.rank = rank;
    if (r.connected) {
      snap.condition = r.answered ? hang::RankCondition::kRunning : hang::RankCondition::kNoAnswer;
    } else if (r.bye && r.end_reason.rfind("killed by signal", 0) != 0) {
      snap.condition = hang::RankCondition::kFinished;
    } else {
      // No bye, or a bye sent from a fatal-signal handler: the process died.
      snap.condition = hang::RankCondition::kDied;
    }
    snap.end_reason = r.connected ? std::string() : r.end_reason;
    snap.has_state = r.connected && r.answered;
    if (snap.has_state) {
      snap.state = r.state;
    }
    in.ranks.push_back(std::move(snap));
  }
  return in;
}

}  // namespace commprof
