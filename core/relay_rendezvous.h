// Finding this node's relay, or starting it (docs/scale.md#relays).
//
// With relays on, each rank's collector asks here for the address of the relay that serves its
// node (or its group of N ranks on the node) before it connects. The first rank of the group to
// ask creates a lock file (O_EXCL, so exactly one does) in a node-local directory and starts
// `commprof relay`, detached from the rank (its own session, its output in a log beside its
// shard); the relay writes its address into the group's address file once its parent accepted it.
// Every rank of the group, the starter included, waits for that file and connects to the address
// in it. The key includes a digest of the run's secret, so that two runs (two steps of one Slurm
// job) never meet each other's relays. Whatever fails here, the caller connects to the parent
// aggregator instead: relays only spread the load, they are never needed for an event to arrive.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace commprof {

struct RelayRequest {
  std::string command;               // the commprof executable that runs `commprof relay`
  std::string parent;                // host:port of the job's aggregator, which the relay reports to
  std::string shard_dir;             // where the relay writes its shard (absolute; visible to the parent)
  std::string job_key;               // RelayJobKey(job id, secret, parent)
  std::string host_key;              // the node (SanitizeKey of its name), or a simulated node
  uint32_t group = 0;                // which relay of the node
  std::vector<std::string> options;  // more `commprof relay` options (--queue-mb N, --compression C)
  uint32_t timeout_ms = 5000;        // for the relay's address to appear
  std::string rendezvous_dir;        // empty: $TMPDIR (else /tmp) + /commprof-relays-UID
};

// The relay's address (host:port) for the group, once it is listening and its parent accepted it.
Result<std::string> FindOrStartRelay(const RelayRequest& request);

// The relay's side of the rendezvous, BASE being its --rendezvous argument: publishes its address
// for the group's ranks once its parent accepted it ...
bool PublishRelayAddress(const std::string& base, const std::string& address);
// ... and, when it stops taking ranks, removes the group's files, so that a rank still to come
// starts a new relay.
void WithdrawRelay(const std::string& base);

// "<job id>-<16 hex digits of HMAC-SHA256(secret, "relay " + parent)>", made safe for a file name:
// one aggregator's relays (parent: its address) are found by its own ranks only.
std::string RelayJobKey(std::string_view job_id, std::string_view secret, std::string_view parent);
// `text` with every byte outside [A-Za-z0-9._-] replaced by '_', at most 64 bytes.
std::string SanitizeKey(std::string_view text);

// The relay group of a rank: its index among the ranks of its node, divided by the ranks per
// relay. `local_index` comes from the launcher (LauncherLocalRank, core/launcher_env.h).
uint32_t RelayGroup(uint32_t local_index, uint32_t ranks_per_relay);

}  // namespace commprof
