#include "analysis/hang/hang_json.h"

#include <string>
#include <type_traits>
#include <vector>

namespace commprof::hang {
namespace {

using Json = nlohmann::ordered_json;

// The keys of each struct, in document order (docs/report-json.md, hang).
template <class V>
void Walk(MismatchSide& s, V& v) {
  v("value", s.value);
  v("ranks", s.ranks);
}
template <class V>
void Walk(Mismatch& s, V& v) {
  v("kind", s.kind);
  v("sides", s.sides);
}
template <class V>
void Walk(Waiter& s, V& v) {
  v("rank", s.rank);
  v("op", s.op);
  v("waiting_s", s.waiting_s);
  v("call_site", s.call_site);
}
template <class V>
void Walk(Absent& s, V& v) {
  v("rank", s.rank);
  v("state", s.state);
  v("where", s.where);
}
template <class V>
void Walk(CommFinding& s, V& v) {
  v("comm_id", s.comm_id);
  v("comm_name", s.comm_name);
  v("nccl", s.nccl);
  v("seq", s.seq);
  v("op", s.op);
  v("size", s.size);
  v("unknown_members", s.unknown_members);
  v("kind", s.kind);
  v("culprits", s.culprits);
  v("verdict", s.verdict);
  v("waiting", s.waiting);
  v("not_entered", s.not_entered);
  v("completed", s.completed);
  v("mismatches", s.mismatches);
}
template <class V>
void Walk(P2pWait& s, V& v) {
  v("rank", s.rank);
  v("op", s.op);
  v("comm_id", s.comm_id);
  v("comm_name", s.comm_name);
  v("peer", s.peer);
  v("peer_world", s.peer_world);
  v("tag", s.tag);
  v("waiting_s", s.waiting_s);
  v("peer_doing", s.peer_doing);
}
template <class V>
void Walk(RankPosition& s, V& v) {
  v("rank", s.rank);
  v("condition", s.condition);
  v("end_reason", s.end_reason);
  v("answered", s.answered);
  v("idle_s", s.idle_s);
  v("doing", s.doing);
}
template <class V>
void Walk(HangReport& s, V& v) {
  v("hang", s.hang);
  v("verdict", s.verdict);
  v("culprits", s.culprits);
  v("consequences", s.consequences);
  v("source", s.source);
  v("timeout_s", s.timeout_s);
  v("detected_utc_ns", s.detected_utc_ns);
  v("world_size", s.world_size);
  v("comms", s.comms);
  v("p2p", s.p2p);
  v("ranks", s.ranks);
}

// One walk per struct, used to write and to read: the keys are written once.
struct Writer {
  Json& j;
  template <class T>
  void operator()(const char* key, const T& v) {
    Put(j[key], v);
  }
  static void Put(Json& out, const std::string& v) { out = v; }
  static void Put(Json& out, bool v) { out = v; }
  static void Put(Json& out, double v) { out = v; }
  static void Put(Json& out, uint64_t v) { out = v; }
  static void Put(Json& out, uint32_t v) { out = v; }
  static void Put(Json& out, int64_t v) { out = v; }
  static void Put(Json& out, int32_t v) { out = v; }
  template <class T>
  static void Put(Json& out, const std::vector<T>& v) {
    out = Json::array();
    for (const T& e : v) {
      Json x;
      Put(x, e);
      out.push_back(std::move(x));
    }
  }
  template <class T>
  static void Put(Json& out, const T& s) {
    out = Json::object();
    Writer w{out};
    Walk(const_cast<T&>(s), w);
  }
};

struct Reader {
  const Json& j;
  std::string path;
  Status st = Status::Ok();
  template <class T>
  void operator()(const char* key, T& v) {
    if (!st.ok()) {
      return;
    }
    const std::string p = path + "." + key;
    if (!j.is_object() || !j.contains(key)) {
      st = InvalidArgument(p + ": missing");
      return;
    }
    st = Get(j[key], p, v);
  }
  static Status Type(const std::string& p, const char* want, const Json& v) {
    return InvalidArgument(p + ": expected " + want + ", got " + v.type_name());
  }
  static Status Get(const Json& v, const std::string& p, std::string& out) {
    if (!v.is_string()) {
      return Type(p, "a string", v);
    }
    out = v.get<std::string>();
    return Status::Ok();
  }
  static Status Get(const Json& v, const std::string& p, bool& out) {
    if (!v.is_boolean()) {
      return Type(p, "a boolean", v);
    }
    out = v.get<bool>();
    return Status::Ok();
  }
  static Status Get(const Json& v, const std::string& p, double& out) {
    if (!v.is_number()) {
      return Type(p, "a number", v);
    }
    out = v.get<double>();
    return Status::Ok();
  }
  template <class I>
  requires std::is_integral_v<I>
  static Status Get(const Json& v, const std::string& p, I& out) {
    if (!v.is_number_integer()) {
      return Type(p, "an integer", v);
    }
    if (std::is_unsigned_v<I> && !v.is_number_unsigned()) {
      return InvalidArgument(p + ": is negative");
    }
    out = v.get<I>();
    return Status::Ok();
  }
  template <class T>
  static Status Get(const Json& v, const std::string& p, std::vector<T>& out) {
    if (!v.is_array()) {
      return Type(p, "an array", v);
    }
    out.clear();
    for (size_t i = 0; i < v.size(); ++i) {
      T e{};
      COMMPROF_RETURN_IF_ERROR(Get(v[i], p + "[" + std::to_string(i) + "]", e));
      out.push_back(std::move(e));
    }
    return Status::Ok();
  }
  template <class T>
  requires std::is_class_v<T>
  static Status Get(const Json& v, const std::string& p, T& out) {
    if (!v.is_object()) {
      return Type(p, "an object", v);
    }
    Reader r{v, p};
    Walk(out, r);
    return r.st;
  }
};

}  // namespace

Json HangReportToJson(const HangReport& report) {
  Json j;
  Writer::Put(j, report);
  return j;
}

Result<HangReport> HangReportFromJson(const Json& json, const std::string& where) {
  HangReport r;
  COMMPROF_RETURN_IF_ERROR(Reader::Get(json, where, r));
  return r;
}

}  // namespace commprof::hang
