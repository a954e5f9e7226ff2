// The shipper thread: every flush period it drains the rings into event frames and sends them,
// with any new strings first, to the aggregator; when the aggregator cannot be reached (or
// vanishes) it switches, once, to a spool file and re-sends the string table there.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "collector/transport.h"

namespace commprof {

class Runtime;

class Shipper {
 public:
  explicit Shipper(Runtime& runtime);
  ~Shipper();

  void Start();
  void Flush();  // wake the thread now
  void Stop();   // final drain + clock + bye; joins the thread

 private:
  void Loop();
  void Connect();
  void ShipOnce();
  void SendOrSpool(std::vector<uint8_t>& frames);
  void SwitchToSpool(const char* why);
  // Clock alignment for ranks without MPI: ping-pong against the aggregator over this connection.
  bool TcpSyncWanted() const;
  void TcpEpoch(uint32_t rounds);

  Runtime& rt_;
  wire::Hello hello_;
  std::vector<uint8_t> hello_frame_;  // signed once at construction
  std::unique_ptr<Transport> transport_;
  bool spooling_ = false;
  uint32_t strings_sent_ = 0;
  uint64_t batch_seq_ = 0;
  uint64_t batches_sent_ = 0;
  uint64_t bytes_sent_ = 0;
  uint64_t events_shipped_ = 0;
  uint64_t clock_sent_version_ = 0;
  std::vector<ClockPoint> tcp_points_;
  uint64_t next_tcp_sync_ns_ = 0;
  bool tcp_sync_failed_ = false;  // an exchange broke: the stream's state is unknown, stop trying
  std::vector<uint8_t> out_;
  std::unique_ptr<commprof_event[]> scratch_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool flush_ = false;
  std::thread thread_;
};

}  // namespace commprof
