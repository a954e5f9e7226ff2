// The typed report model: what `commprof report` shows, built once per analysis run from the
// JobReport and rendered as text, JSON and HTML (docs/report-json.md documents every key).
//
// Each struct lists its JSON keys once, in its Fields() (key, member, flags), in the order the JSON
// document has them. report_json.cc walks these lists to write the JSON and to read it back with
// validation, so the schema is written in exactly one place. Every member is optional: a report
// built by BuildReportModel() fills them all (as the JSON always had them), while a report read
// from JSON may lack any key that is not kRequired (an older report, or a hand-made one), and
// the renderers show such a value as absent.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/report/job_report.h"

namespace commprof {

template <typename T>
using Opt = std::optional<T>;

// Field flags. kRequired: reading fails when the key is absent or null. kInteger: the value must
// be a JSON integer (identifiers, counts that name things); other numbers also accept a fraction.
enum ReportFieldFlags : unsigned { kReportRequired = 1u, kReportInteger = 2u };

// An object of named counts whose keys are data, not schema (p2p.unmatched_by_reason).
using NamedCounts = std::vector<std::pair<std::string, uint64_t>>;

struct ReportModel {
  struct Incomplete {
    Opt<uint64_t> comm_id, seq;
    Opt<std::string> type;
    Opt<uint64_t> comm_size;
    Opt<std::vector<int64_t>> ranks_present;
    template <class S, class V>
    static void Fields(S& s, V& v) {
      v("comm_id", s.comm_id, kReportInteger);
      v("seq", s.seq, kReportInteger);
      v("type", s.type);
      v("comm_size", s.comm_size);
      v("ranks_present", s.ranks_present, kReportInteger);
    }
  };
  struct Instances {
    Opt<uint64_t> matched, incomplete;
    Opt<std::vector<Incomplete>> incomplete_list;
    template <class S, class V>
    static void Fields(S& s, V& v) {
      v("matched", s.matched);
      v("incomplete", s.incomplete);
      v("incomplete_list", s.incomplete_list);
    }
  };
  struct Breakdown {
    Opt<int64_t> span_ns, compute_ns, exposed_comm_ns, memory_ns, idle_ns;
    template <class S, class V>
    static void Fields(S& s, V& v) {
      v("span_ns", s.span_ns);
      v("compute_ns", s.compute_ns);
      v("exposed_comm_ns", s.exposed_comm_ns);
      v("memory_ns", s.memory_ns);
      v("idle_ns", s.idle_ns);
    }
  };
  struct Device {
    Opt<uint64_t> device;
    Opt<int64_t> comm_union_ns;
    Opt<double> overlap;
    Opt<int64_t> exposed_comm_ns;
    Opt<Breakdown> breakdown;
    template <class S, class V>
    static void Fields(S& s, V& v) {
      v("device", s.device, kReportInteger);
      v("comm_union_ns", s.comm_union_ns);
      v("overlap", s.overlap);
      v("exposed_comm_ns", s.exposed_comm_ns);
      v("breakdown", s.breakdown);
    }
  };
  struct RankP2p {
    Opt<uint64_t> sent, received, bytes_sent, bytes_received;
    Opt<int64_t> p2p_time_ns, late_sender_wait_ns, late_receiver_wait_ns;
    Opt<uint64_t> unmatched_sends, unmatched_recvs;
    template <class S, class V>
    static void Fields(S& s, V& v) {
      v("sent", s.sent);
      v("received", s.received);
      v("bytes_sent", s.bytes_sent);
      v("bytes_received", s.bytes_received);
      v("p2p_time_ns", s.p2p_time_ns);
      v("late_sender_wait_ns", s.late_sender_wait_ns);
      v("late_receiver_wait_ns", s.late_receiver_wait_ns);
      v("unmatched_sends", s.unmatched_sends);
      v("unmatched_recvs", s.unmatched_recvs);
    }
  };
  struct Culprit {
    Opt<int64_t> rank;
    Opt<int64_t> ns;
    template <class S, class V>
    static void Fields(S& s, V& v) {
      v("rank", s.rank, kReportRequired | kReportInteger);
      v("ns", s.ns);
    }
  };
  struct TimeCategories {
    Opt<int64_t> span_ns, compute_ns, startup_ns, shutdown_ns, transfer_ns, wait_ns, unattributed_ns, idle_ns;
    Opt<std::vector<Culprit>> wait_by_culprit;
    template <class S, class V>
    static void Fields(S& s, V& v) {
      v("span_ns", s.span_ns);
      v("compute_ns", s.compute_ns);
      v("startup_ns", s.startup_ns);
      v("shutdown_ns", s.shutdown_ns);
      v("transfer_ns", s.transfer_ns);
      v("wait_ns", s.wait_ns);
      v("unattributed_ns", s.unattributed_ns);
      v("idle_ns", s.idle_ns);
      v("wait_by_culprit", s.wait_by_culprit);
    }
  };
  struct Rank {
    Opt<int64_t> rank;
    Opt<std::string> host;
    Opt<int64_t> pid;
    Opt<int64_t> comm_time_ns, wait_time_ns;
    Opt<double> wait_share;
    Opt<uint64_t> times_last;
    Opt<int64_t> delay_caused_ns, wait_imposed_ns;
    Opt<uint64_t> instances;
    Opt<int64_t> transfer_time_ns;
    // Overlap and breakdown (§6): present for the ranks the overlap pass measured.
    Opt<double> overlap;
    Opt<int64_t> exposed_comm_ns;
    Opt<std::string> overlap_basis;
    Opt<int64_t> comm_union_ns;
    Opt<Breakdown> breakdown;
    Opt<uint64_t> incomplete_events;
    Opt<std::vector<Device>> devices;
    Opt<RankP2p> p2p;
    // Root causes (§9): the waiting this rank caused, and where its own time went.
    Opt<int64_t> delay_cost_ns, delay_direct_ns, delay_propagated_ns;
    Opt<TimeCategories> time;
    // What the file holds of the rank (docs/file-format.md#status-values).
    Opt<std::string> status, end_reason;
    Opt<uint64_t> batches_lost, missing_events;
    template <class S, class V>
    static void Fields(S& s, V& v) {
      v("rank", s.rank, kReportRequired | kReportInteger);
      v("host", s.host);
      v("pid", s.pid, kReportInteger);
      v("status", s.status);
      v("end_reason", s.end_reason);
      v("batches_lost", s.batches_lost, kReportInteger);
      v("missing_events", s.missing_events, kReportInteger);
      v("comm_time_ns", s.comm_time_ns);
      v("wait_time_ns", s.wait_time_ns);
      v("wait_share", s.wait_share);
      v("times_last", s.times_last);
      v("delay_caused_ns", s.delay_caused_ns);
      v("wait_imposed_ns", s.wait_imposed_ns);
      v("instances", s.instances);
      v("transfer_time_ns", s.transfer_time_ns);
      v("overlap", s.overlap);
      v("exposed_comm_ns", s.exposed_comm_ns);
      v("overlap_basis", s.overlap_basis);
      v("comm_union_ns", s.comm_union_ns);
      v("breakdown", s.breakdown);
      v("incomplete_events", s.incomplete_events);
      v("devices", s.devices);
      v("p2p", s.p2p);
      v("delay_cost_ns", s.delay_cost_ns);
      v("delay_direct_ns", s.delay_direct_ns);
      v("delay_propagated_ns", s.delay_propagated_ns);
      v("time", s.time);
    }
  };
  struct Collective {
    Opt<std::string> type;
    Opt<uint64_t> count, bytes;
    Opt<double> mean_duration_ns, mean_wait_ns, mean_transfer_ns;
    Opt<int64_t> skew_p50_ns, skew_p99_ns;
    Opt<double> algbw_gbps, busbw_gbps;
    template <class S, class V>
    static void Fields(S& s, V& v) {
      v("type", s.type);
      v("count", s.count);
      v("bytes", s.bytes);
      v("mean_duration_ns", s.mean_duration_ns);
      v("mean_wait_ns", s.mean_wait_ns);
      v("mean_transfer_ns", s.mean_transfer_ns);
      v("skew_p50_ns", s.skew_p50_ns);
      v("skew_p99_ns", s.skew_p99_ns);
      v("algbw_gbps", s.algbw_gbps);
      v("busbw_gbps", s.busbw_gbps);
    }
  };
  struct WorstInstance {
    Opt<uint64_t> comm_id, seq;
    Opt<std::string> type;
    Opt<uint64_t> bytes;
    Opt<int64_t> start_ns, skew_ns, last_rank, delay_caused_ns, total_wait_ns;
    template <class S, class V>
    static void Fields(S& s, V& v) {
      v("comm_id", s.comm_id, kReportInteger);
      v("seq", s.seq, kReportInteger);
      v("type", s.type);
      v("bytes", s.bytes);
      v("start_ns", s.start_ns);
      v("skew_ns", s.skew_ns);
      v("last_rank", s.last_rank, kReportInteger);
      v("delay_caused_ns", s.delay_caused_ns);
      v("total_wait_ns", s.total_wait_ns);
    }
  };
  struct UnmatchedP2p {
    Opt<int64_t> rank;
    Opt<std::string> kind;
    Opt<uint64_t> comm_id;
    Opt<int64_t> peer;
    Opt<uint64_t> tag, bytes;
    Opt<int64_t> start_ns;
    Opt<std::string> reason;
    template <class S, class V>
    static void Fields(S& s, V& v) {
      v("rank", s.rank, kReportInteger);
      v("kind", s.kind);
      v("comm_id", s.comm_id, kReportInteger);
      v("peer", s.peer, kReportInteger);
      v("tag", s.tag, kReportInteger);
      v("bytes", s.bytes);
      v("start_ns", s.start_ns);
      v("reason", s.reason);
    }
  };
  struct Message {
    Opt<uint64_t> comm_id;
    Opt<int64_t> src, dst;
    Opt<uint64_t> tag, bytes;
    Opt<int64_t> send_start_ns, recv_start_ns, late_sender_ns, late_receiver_ns;
    template <class S, class V>
    static void Fields(S& s, V& v) {
      v("comm_id", s.comm_id, kReportInteger);
      v("src", s.src, kReportInteger);
      v("dst", s.dst, kReportInteger);
      v("tag", s.tag, kReportInteger);
      v("bytes", s.bytes);
      v("send_start_ns", s.send_start_ns);
      v("recv_start_ns", s.recv_start_ns);
      v("late_sender_ns", s.late_sender_ns);
      v("late_receiver_ns", s.late_receiver_ns);
    }
  };
  struct P2p {
    Opt<uint64_t> sends, recvs, matched, unmatched_sends, unmatched_recvs, unmatched_sendrecv, proc_null, bytes;
    Opt<int64_t> late_sender_wait_ns, late_receiver_wait_ns;
    Opt<NamedCounts> unmatched_by_reason;
    Opt<std::vector<UnmatchedP2p>> unmatched_list;
    Opt<std::vector<Message>> worst_messages;
    template <class S, class V>
    static void Fields(S& s, V& v) {
      v("sends", s.sends);
      v("recvs", s.recvs);
      v("matched", s.matched);
      v("unmatched_sends", s.unmatched_sends);
      v("unmatched_recvs", s.unmatched_recvs);
      v("unmatched_sendrecv", s.unmatched_sendrecv);
      v("proc_null", s.proc_null);
      v("bytes", s.bytes);
      v("late_sender_wait_ns", s.late_sender_wait_ns);
      v("late_receiver_wait_ns", s.late_receiver_wait_ns);
      v("unmatched_by_reason", s.unmatched_by_reason);
      v("unmatched_list", s.unmatched_list);
      v("worst_messages", s.worst_messages);
    }
  };
  struct StragglerCommunicator {
    Opt<uint64_t> comm_id;
    Opt<std::string> name;
    Opt<uint64_t> size;
    Opt<std::vector<int64_t>> members;
    Opt<int64_t> delay_cost_ns;
    template <class S, class V>
    static void Fields(S& s, V& v) {
      v("comm_id", s.comm_id, kReportInteger);
      v("name", s.name);
      v("size", s.size, kReportInteger);
      v("members", s.members, kReportInteger);
      v("delay_cost_ns", s.delay_cost_ns);
    }
  };
  struct Period {
    Opt<uint64_t> every;
    Opt<int64_t> typical_lateness_ns;
    template <class S, class V>
    static void Fields(S& s, V& v) {
      v("every", s.every, kReportRequired | kReportInteger);
      v("typical_lateness_ns", s.typical_lateness_ns);
    }
  };
  struct Window {
    Opt<int64_t> start_ns, end_ns;
    template <class S, class V>
    static void Fields(S& s, V& v) {
      v("start_ns", s.start_ns);
      v("end_ns", s.end_ns);
    }
  };
  struct Straggler {
    Opt<int64_t> rank;
    Opt<std::string> host;
    Opt<int64_t> device;  // absent: not known
    Opt<int64_t> delay_cost_ns, direct_ns, propagated_ns;
    Opt<double> share;
    Opt<int64_t> saving_ns;  // absent: not estimated (past the first few stragglers)
    Opt<std::string> pattern;
    Opt<Period> period;  // periodic only
    Opt<Window> window;  // transient only
    Opt<std::vector<StragglerCommunicator>> communicators;
    Opt<std::string> cause;
    Opt<uint64_t> late_instances;
    Opt<int64_t> typical_lateness_ns;
    template <class S, class V>
    static void Fields(S& s, V& v) {
      v("rank", s.rank, kReportRequired | kReportInteger);
      v("host", s.host);
      v("device", s.device, kReportInteger);
      v("delay_cost_ns", s.delay_cost_ns);
      v("direct_ns", s.direct_ns);
      v("propagated_ns", s.propagated_ns);
      v("share", s.share);
      v("saving_ns", s.saving_ns);
      v("pattern", s.pattern);
      v("period", s.period);
      v("window", s.window);
      v("communicators", s.communicators);
      v("cause", s.cause);
      v("late_instances", s.late_instances);
      v("typical_lateness_ns", s.typical_lateness_ns);
    }
  };
  struct Delay {
    Opt<int64_t> total_wait_ns, attributed_ns, unattributed_ns;
    template <class S, class V>
    static void Fields(S& s, V& v) {
      v("total_wait_ns", s.total_wait_ns);
      v("attributed_ns", s.attributed_ns);
      v("unattributed_ns", s.unattributed_ns);
    }
  };
  struct LatenessRank {
    Opt<int64_t> rank;
    Opt<std::vector<Opt<double>>> mean_lateness_ns;  // per bin; absent: no instance in the bin
    Opt<std::vector<Opt<int64_t>>> times_last;       // per bin
    template <class S, class V>
    static void Fields(S& s, V& v) {
      v("rank", s.rank, kReportRequired | kReportInteger);
      v("mean_lateness_ns", s.mean_lateness_ns, kReportRequired);
      v("times_last", s.times_last, kReportInteger);
    }
  };
  struct Lateness {
    Opt<int64_t> start_ns, bin_ns, bins;
    Opt<std::vector<LatenessRank>> ranks;
    template <class S, class V>
    static void Fields(S& s, V& v) {
      v("start_ns", s.start_ns);
      v("bin_ns", s.bin_ns);
      v("bins", s.bins, kReportRequired | kReportInteger);
      v("ranks", s.ranks);
    }
  };
  struct ClockRank {
    Opt<int64_t> rank;
    Opt<int64_t> clock_offset_ns;
    Opt<double> clock_drift_ppm;
    Opt<int64_t> clock_error_bound_ns;  // -1: unmeasured
    Opt<std::string> clock_method;
    template <class S, class V>
    static void Fields(S& s, V& v) {
      v("rank", s.rank, kReportRequired | kReportInteger);
      v("clock_offset_ns", s.clock_offset_ns);
      v("clock_drift_ppm", s.clock_drift_ppm);
      v("clock_error_bound_ns", s.clock_error_bound_ns);
      v("clock_method", s.clock_method);
    }
  };
  struct Clock {
    Opt<uint64_t> violations, instances_checked;
    Opt<std::vector<ClockRank>> ranks;
    template <class S, class V>
    static void Fields(S& s, V& v) {
      v("violations", s.violations);
      v("instances_checked", s.instances_checked);
      v("ranks", s.ranks);
    }
  };
  struct Memory {
    Opt<int64_t> rank;
    Opt<uint64_t> device;
    Opt<std::string> memory_kind;
    Opt<int64_t> peak_bytes, peak_time_ns, final_bytes;
    Opt<uint64_t> allocs, frees, unmatched_frees, points;
    template <class S, class V>
    static void Fields(S& s, V& v) {
      v("rank", s.rank, kReportInteger);
      v("device", s.device, kReportInteger);
      v("memory_kind", s.memory_kind);
      v("peak_bytes", s.peak_bytes);
      v("peak_time_ns", s.peak_time_ns);
      v("final_bytes", s.final_bytes);
      v("allocs", s.allocs);
      v("frees", s.frees);
      v("unmatched_frees", s.unmatched_frees);
      v("points", s.points);
    }
  };

  // Per training step (docs/metrics.md §10). A rank's figure has the shape of a culprit's.
  using StepRankNs = Culprit;
  struct Step {
    // window, top_cause and straggler are nullable keys: present and null means none (a report built
    // here always has them); the accessors below give "none" for null and absent alike.
    Opt<uint64_t> step;
    Opt<Opt<int64_t>> window;  // null: the step began outside any capture window
    Opt<int64_t> start_ns;
    Opt<std::vector<StepRankNs>> duration_ns;
    Opt<int64_t> min_ns, max_ns;
    Opt<double> mean_ns, imbalance;
    Opt<int64_t> comm_ns, wait_ns, attributed_ns;
    Opt<std::vector<StepRankNs>> wait_by_rank;
    Opt<Opt<StepRankNs>> top_cause;  // null: no waiting charged in the step
    Opt<Opt<int64_t>> straggler;     // null: none (§10.3)
    Opt<int64_t> Window() const { return window ? *window : std::nullopt; }
    Opt<StepRankNs> TopCause() const { return top_cause ? *top_cause : std::nullopt; }
    Opt<int64_t> Straggler() const { return straggler ? *straggler : std::nullopt; }
    template <class S, class V>
    static void Fields(S& s, V& v) {
      v("step", s.step, kReportRequired | kReportInteger);
      v("window", s.window, kReportInteger);
      v("start_ns", s.start_ns);
      v("duration_ns", s.duration_ns);
      v("min_ns", s.min_ns);
      v("max_ns", s.max_ns);
      v("mean_ns", s.mean_ns);
      v("imbalance", s.imbalance);
      v("comm_ns", s.comm_ns);
      v("wait_ns", s.wait_ns);
      v("wait_by_rank", s.wait_by_rank);
      v("attributed_ns", s.attributed_ns);
      v("top_cause", s.top_cause);
      v("straggler", s.straggler, kReportInteger);
    }
  };
  struct StepTime {
    Opt<uint64_t> steps;
    Opt<int64_t> p50_ns, p99_ns, max_ns;
    Opt<double> mean_ns;
    Opt<uint64_t> slowest_step, with_straggler;
    template <class S, class V>
    static void Fields(S& s, V& v) {
      v("steps", s.steps, kReportInteger);
      v("p50_ns", s.p50_ns);
      v("p99_ns", s.p99_ns);
      v("max_ns", s.max_ns);
      v("mean_ns", s.mean_ns);
      v("slowest_step", s.slowest_step, kReportInteger);
      v("with_straggler", s.with_straggler, kReportInteger);
    }
  };

  // What the analysis could not see: ranks that never connected, parts of the file that could not
  // be read (left out of every figure), events recorded but not in the file.
  struct RankRange {
    Opt<int64_t> first, last;
    template <class S, class V>
    static void Fields(S& s, V& v) {
      v("first", s.first, kReportInteger);
      v("last", s.last, kReportInteger);
    }
  };
  struct Unreadable {
    Opt<int64_t> rank;  // absent (null) when the group's name is not a rank
    Opt<std::string> reason;
    // The rows of a damaged last chunk a rank is read without; absent (null): the part is left out.
    Opt<uint64_t> damaged_rows;
    template <class S, class V>
    static void Fields(S& s, V& v) {
      v("rank", s.rank, kReportInteger);
      v("reason", s.reason);
      v("damaged_rows", s.damaged_rows, kReportInteger);
    }
  };
  struct Completeness {
    Opt<std::vector<RankRange>> never_connected;
    Opt<std::vector<Unreadable>> unreadable;
    Opt<uint64_t> lost_batches, missing_events;
    template <class S, class V>
    static void Fields(S& s, V& v) {
      v("never_connected", s.never_connected);
      v("unreadable", s.unreadable);
      v("lost_batches", s.lost_batches, kReportInteger);
      v("missing_events", s.missing_events, kReportInteger);
    }
  };

  // Call sites (`commprof run --stacks`, docs/metrics.md §11): per call site and operation,
  // largest wait first.
  struct CallSite {
    Opt<std::string> function, file;
    Opt<int64_t> line;
    Opt<std::string> module;
    Opt<uint64_t> address;
    Opt<std::string> op;
    Opt<uint64_t> calls;
    Opt<int64_t> time_ns, wait_ns;
    Opt<uint64_t> bytes, ranks;
    Opt<std::vector<std::string>> stack;
    template <class S, class V>
    static void Fields(S& s, V& v) {
      v("function", s.function);
      v("file", s.file);
      v("line", s.line, kReportInteger);
      v("module", s.module);
      v("address", s.address, kReportInteger);
      v("op", s.op);
      v("calls", s.calls, kReportInteger);
      v("time_ns", s.time_ns);
      v("wait_ns", s.wait_ns);
      v("bytes", s.bytes, kReportInteger);
      v("ranks", s.ranks, kReportInteger);
      v("stack", s.stack);
    }
  };

  // Every communicator the report names (in worst_instances, instances.incomplete_list and the
  // stragglers), by id: its name, size and the world ranks seen in it, as text and HTML show them.
  struct Communicator {
    Opt<uint64_t> comm_id;
    Opt<std::string> name;
    Opt<uint64_t> size;
    Opt<std::vector<int64_t>> members;
    template <class S, class V>
    static void Fields(S& s, V& v) {
      v("comm_id", s.comm_id, kReportRequired | kReportInteger);
      v("name", s.name);
      v("size", s.size, kReportInteger);
      v("members", s.members, kReportInteger);
    }
  };

  Opt<std::string> schema;  // always "commprof-report"
  Opt<int64_t> schema_version;
  Opt<std::string> path, job_id;
  Opt<int64_t> world_size;
  Opt<Instances> instances;
  Opt<int64_t> skew_threshold_ns;
  Opt<std::vector<Rank>> ranks;
  Opt<std::vector<Collective>> collectives;
  Opt<std::vector<WorstInstance>> worst_instances;
  Opt<P2p> p2p;
  Opt<Delay> delay;
  Opt<std::vector<Straggler>> stragglers;
  Opt<Lateness> lateness;
  Opt<Clock> clock;
  Opt<std::vector<Memory>> memory;
  Opt<Completeness> completeness;
  Opt<StepTime> step_time;
  Opt<std::vector<Step>> steps;
  Opt<std::vector<CallSite>> call_sites;
  Opt<std::vector<Communicator>> communicators;
  // The hang diagnosis (docs/hangs.md, schema in docs/report-json.md#hang): null when the job did
  // not hang. Kept as the hang report's own JSON (analysis/hang/hang_json.h), which validates it.
  Opt<Opt<nlohmann::ordered_json>> hang;

  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("schema", s.schema, kReportRequired);
    v("schema_version", s.schema_version, kReportInteger);
    v("path", s.path);
    v("job_id", s.job_id);
    v("world_size", s.world_size, kReportRequired | kReportInteger);
    v("instances", s.instances);
    v("skew_threshold_ns", s.skew_threshold_ns);
    v("ranks", s.ranks, kReportRequired);
    v("collectives", s.collectives);
    v("worst_instances", s.worst_instances);
    v("p2p", s.p2p);
    v("delay", s.delay);
    v("stragglers", s.stragglers);
    v("lateness", s.lateness);
    v("clock", s.clock);
    v("memory", s.memory);
    v("completeness", s.completeness);
    v("step_time", s.step_time);
    v("steps", s.steps);
    v("call_sites", s.call_sites);
    v("communicators", s.communicators);
    v("hang", s.hang);
  }
};

inline constexpr const char* kReportSchemaName = "commprof-report";

// The model of an analysed job: every key filled, exactly as the JSON report has always had them.
ReportModel BuildReportModel(const JobReport& report);

}  // namespace commprof
