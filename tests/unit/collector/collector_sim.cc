#include "collector_sim.h"

#include <gtest/gtest.h>

#include <span>
#include <utility>

namespace commprof::test_support {
namespace {

// Cuts a byte stream into whole frames; what is left over waits for the next bytes.
class FrameSplitter {
 public:
  // Calls on_frame(type, payload) for every whole frame; false (and stops) at a bad header.
  template <typename F>
  Status Feed(std::span<const uint8_t> bytes, F&& on_frame) {
    pending_.insert(pending_.end(), bytes.begin(), bytes.end());
    size_t off = 0;
    Status result = Status::Ok();
    while (pending_.size() - off >= wire::kHeaderSize) {
      auto h = wire::DecodeHeader(std::span<const uint8_t>(pending_).subspan(off, wire::kHeaderSize));
      if (!h.ok()) {
        result = h.status();
        break;
      }
      if (pending_.size() - off - wire::kHeaderSize < h->payload_len) {
        break;
      }
      auto payload = std::span<const uint8_t>(pending_).subspan(off + wire::kHeaderSize, h->payload_len);
      off += wire::kHeaderSize + h->payload_len;
      result = on_frame(h->type, payload);
      if (!result.ok()) {
        break;
      }
    }
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(off));
    return result;
  }

 private:
  std::vector<uint8_t> pending_;
};

}  // namespace

// One accepted connection: frames go to its RankStream as they are sent.
class InProcessAggregator::Link final : public Transport {
 public:
  Link(InProcessAggregator& agg, std::unique_ptr<RankStream> stream) : agg_(agg), stream_(std::move(stream)) {}
  ~Link() override { End("connection closed", false); }

  Status Send(std::span<const uint8_t> bytes) override {
    if (closed_) {
      return Unavailable("send to aggregator failed: connection closed");
    }
    Status st = splitter_.Feed(bytes, [this](wire::FrameType type, std::span<const uint8_t> payload) {
      if (type == wire::FrameType::kClockPing) {
        return AnswerPing(payload);
      }
      Status s = stream_->OnFrame(type, payload);
      if (s.ok() && stream_->said_bye()) {
        agg_.stats_.byes++;
        End("bye", false);
      }
      return s;
    });
    if (!st.ok()) {
      agg_.stats_.dropped++;
      End(st.message(), true);
      return Unavailable("send to aggregator failed: " + st.message());
    }
    return Status::Ok();
  }
  Status Receive(wire::FrameHeader& header, std::vector<uint8_t>& payload, uint32_t) override {
    if (replies_.empty()) {
      return Unavailable("no frame from the aggregator in time");
    }
    header = replies_.front().first;
    payload = std::move(replies_.front().second);
    replies_.erase(replies_.begin());
    return Status::Ok();
  }
  const char* name() const override { return "in-process"; }

 private:
  Status AnswerPing(std::span<const uint8_t> payload) {
    uint64_t now = agg_.reference_ != nullptr ? agg_.reference_->Now() : SteadyNowNs();
    auto ping = wire::DecodeClockPing(payload);
    if (!ping.ok()) {
      return ping.status();
    }
    std::vector<uint8_t> frame;
    wire::AppendClockPong(frame, wire::ClockPong{ping.value(), now});
    auto h = wire::DecodeHeader(std::span<const uint8_t>(frame).first(wire::kHeaderSize));
    replies_.emplace_back(h.value(), std::vector<uint8_t>(frame.begin() + wire::kHeaderSize, frame.end()));
    return Status::Ok();
  }
  void End(const std::string& reason, bool corrupt) {
    if (closed_) {
      return;
    }
    closed_ = true;
    stream_->End(reason, corrupt);
    agg_.stats_.ended++;
  }

  InProcessAggregator& agg_;
  std::unique_ptr<RankStream> stream_;
  FrameSplitter splitter_;
  std::vector<std::pair<wire::FrameHeader, std::vector<uint8_t>>> replies_;
  bool closed_ = false;
};

class InProcessAggregator::Factory final : public TransportFactory {
 public:
  Factory(InProcessAggregator& agg, std::string spool_dir) : agg_(agg), spool_dir_(std::move(spool_dir)) {}

  Result<std::unique_ptr<Transport>> Connect(std::span<const uint8_t> hello_frame) override {
    auto stream = std::make_unique<RankStream>(*agg_.ingest_, agg_.policy_);
    auto h = wire::DecodeHeader(hello_frame.first(wire::kHeaderSize));
    if (!h.ok()) {
      return h.status();
    }
    Status st = stream->OnFrame(h->type, hello_frame.subspan(wire::kHeaderSize));
    if (!st.ok()) {
      agg_.stats_.refused++;
      return Unauthenticated("aggregator refused this rank: " + st.message());
    }
    agg_.stats_.accepted++;
    return std::unique_ptr<Transport>(std::make_unique<Link>(agg_, std::move(stream)));
  }
  Result<std::unique_ptr<Transport>> OpenSpool(const wire::Hello& hello, std::span<const uint8_t> hello_frame,
                                               std::string* path_out) override {
    return commprof::OpenSpool(spool_dir_, hello, hello_frame, path_out);
  }

 private:
  InProcessAggregator& agg_;
  const std::string spool_dir_;
};

InProcessAggregator::InProcessAggregator(const std::string& path, StreamPolicy policy, uint32_t world_size,
                                         const HostClock* reference)
    : policy_(std::move(policy)), reference_(reference) {
  JobMeta meta;
  meta.job_id = policy_.job_id;
  meta.world_size = world_size;
  auto in = Ingest::Start(path, meta, WriterOptions{}, 50);
  EXPECT_TRUE(in.ok()) << in.status().message();
  if (in.ok()) {
    ingest_ = std::move(in.value());
  }
}

std::unique_ptr<TransportFactory> InProcessAggregator::Transports(const std::string& spool_dir) {
  return std::make_unique<Factory>(*this, spool_dir);
}

Status InProcessAggregator::Finish() {
  if (finished_ || ingest_ == nullptr) {
    return Status::Ok();
  }
  finished_ = true;
  return ingest_->Finish();
}

// FrameCapture

class FrameCapture::Sink final : public Transport {
 public:
  Sink(FrameCapture& capture, uint32_t rank) : capture_(capture), rank_(rank) {}
  Status Send(std::span<const uint8_t> bytes) override {
    return splitter_.Feed(bytes, [this](wire::FrameType type, std::span<const uint8_t> payload) {
      capture_.Add(rank_, Frame{type, std::vector<uint8_t>(payload.begin(), payload.end())});
      return Status::Ok();
    });
  }
  Status Receive(wire::FrameHeader&, std::vector<uint8_t>&, uint32_t) override {
    return Unavailable("a capture does not answer");
  }
  Result<bool> TryReceive(wire::FrameHeader& header, std::vector<uint8_t>& payload) override {
    return capture_.TakeDelivered(rank_, header, payload);
  }
  const char* name() const override { return "capture"; }

 private:
  FrameCapture& capture_;
  const uint32_t rank_;
  FrameSplitter splitter_;
};

class FrameCapture::Factory final : public TransportFactory {
 public:
  Factory(FrameCapture& capture, uint32_t rank) : capture_(capture), rank_(rank) {}
  Result<std::unique_ptr<Transport>> Connect(std::span<const uint8_t> hello_frame) override {
    auto sink = std::make_unique<Sink>(capture_, rank_);
    COMMPROF_RETURN_IF_ERROR(sink->Send(hello_frame));
    return std::unique_ptr<Transport>(std::move(sink));
  }
  Result<std::unique_ptr<Transport>> OpenSpool(const wire::Hello&, std::span<const uint8_t>, std::string*) override {
    return Unavailable("a capture has no spool");
  }

 private:
  FrameCapture& capture_;
  const uint32_t rank_;
};

std::unique_ptr<TransportFactory> FrameCapture::Transports(uint32_t rank) {
  return std::make_unique<Factory>(*this, rank);
}

void FrameCapture::Add(uint32_t rank, Frame f) {
  std::lock_guard<std::mutex> lock(mu_);
  frames_[rank].push_back(std::move(f));
}

void FrameCapture::Deliver(uint32_t rank, std::vector<uint8_t> frame) {
  std::lock_guard<std::mutex> lock(mu_);
  inbox_[rank].push_back(std::move(frame));
}

bool FrameCapture::TakeDelivered(uint32_t rank, wire::FrameHeader& header, std::vector<uint8_t>& payload) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& box = inbox_[rank];
  if (box.empty()) {
    return false;
  }
  std::vector<uint8_t> frame = std::move(box.front());
  box.erase(box.begin());
  auto h = wire::DecodeHeader(std::span<const uint8_t>(frame).first(wire::kHeaderSize));
  EXPECT_TRUE(h.ok()) << "a test delivered a malformed frame";
  header = h.value();
  payload.assign(frame.begin() + wire::kHeaderSize, frame.end());
  return true;
}

std::vector<FrameCapture::Frame> FrameCapture::FramesOf(uint32_t rank) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = frames_.find(rank);
  return it == frames_.end() ? std::vector<Frame>{} : it->second;
}

}  // namespace commprof::test_support
