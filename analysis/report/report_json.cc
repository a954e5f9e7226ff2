// JSON writer and validating reader of the report model (report_json.h). Both are generic walks
// over the model's Fields() lists: a new key is one line in report_model.h (and its line in
// docs/report-json.md, which a test compares with what the writer produces).
#include "analysis/report/report_json.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

#include "analysis/hang/hang_json.h"

namespace commprof {
namespace {

using Json = nlohmann::ordered_json;

// ---------------------------------------------------------------------------------------------
// Writing

Json ToJsonValue(int64_t v) { return Json(v); }
Json ToJsonValue(uint64_t v) { return Json(v); }
Json ToJsonValue(double v) { return Json(v); }
[[maybe_unused]] Json ToJsonValue(bool v) { return Json(v); }
Json ToJsonValue(const std::string& v) { return Json(v); }
Json ToJsonValue(const NamedCounts& v);
// A JSON-valued key (hang): written as it is.
[[maybe_unused]] Json ToJsonValue(const Json& v) { return v; }
template <class T>
Json ToJsonValue(const std::optional<T>& v);
template <class T>
Json ToJsonValue(const std::vector<T>& v);
template <class T>
Json ToJsonValue(const T& s);

class JsonWriter {
 public:
  explicit JsonWriter(Json& out) : out_(out) {}
  template <class T>
  void operator()(const char* key, const std::optional<T>& field, unsigned /*flags*/ = 0) {
    if (field) {
      out_[key] = ToJsonValue(*field);
    }
  }

 private:
  Json& out_;
};

Json ToJsonValue(const NamedCounts& v) {
  Json j = Json::object();
  for (const auto& [name, count] : v) {
    j[name] = count;
  }
  return j;
}

// An entry of a per-bin array: absent is null.
template <class T>
Json ToJsonValue(const std::optional<T>& v) {
  return v ? ToJsonValue(*v) : Json(nullptr);
}

template <class T>
Json ToJsonValue(const std::vector<T>& v) {
  Json j = Json::array();
  for (const T& e : v) {
    j.push_back(ToJsonValue(e));
  }
  return j;
}

template <class T>
Json ToJsonValue(const T& s) {
  Json j = Json::object();
  JsonWriter w(j);
  T::Fields(s, w);
  return j;
}

// ---------------------------------------------------------------------------------------------
// Reading

const char* KindName(bool integer) { return integer ? "an integer" : "a number"; }

Status Bad(const std::string& path, const std::string& what) {
  return InvalidArgument("report key " + path + ": " + what);
}

Status WrongType(const std::string& path, const char* expected, const Json& v) {
  return Bad(path, std::string("expected ") + expected + ", got " + v.type_name());
}

// Numbers: a JSON integer always; a fraction only where the key is not kReportInteger (rounded);
// a non-finite value (only possible in a JSON built in memory) reads as absent.
Status ReadNumber(const Json& v, const std::string& path, unsigned flags, std::optional<double>& out) {
  const bool integer = (flags & kReportInteger) != 0;
  if (!v.is_number() || (integer && !v.is_number_integer())) {
    return WrongType(path, KindName(integer), v);
  }
  const double d = v.get<double>();
  out = std::isfinite(d) ? std::optional<double>(d) : std::nullopt;
  return Status::Ok();
}

Status Read(const Json& v, const std::string& path, unsigned flags, std::optional<int64_t>& out) {
  if (v.is_number_unsigned()) {
    out = static_cast<int64_t>(std::min<uint64_t>(v.get<uint64_t>(), INT64_MAX));
    return Status::Ok();
  }
  if (v.is_number_integer()) {
    out = v.get<int64_t>();
    return Status::Ok();
  }
  std::optional<double> d;
  COMMPROF_RETURN_IF_ERROR(ReadNumber(v, path, flags, d));
  out.reset();
  if (d) {
    out = std::llround(std::clamp(*d, -9.2e18, 9.2e18));
  }
  return Status::Ok();
}

Status Read(const Json& v, const std::string& path, unsigned flags, std::optional<uint64_t>& out) {
  std::optional<int64_t> i;
  if (v.is_number_unsigned()) {
    out = v.get<uint64_t>();
    return Status::Ok();
  }
  COMMPROF_RETURN_IF_ERROR(Read(v, path, flags, i));
  if (i && *i < 0) {
    return Bad(path, "is negative");
  }
  out.reset();
  if (i) {
    out = static_cast<uint64_t>(*i);
  }
  return Status::Ok();
}

Status Read(const Json& v, const std::string& path, unsigned flags, std::optional<double>& out) {
  return ReadNumber(v, path, flags, out);
}

[[maybe_unused]] Status Read(const Json& v, const std::string& path, unsigned /*flags*/, std::optional<bool>& out) {
  if (!v.is_boolean()) {
    return WrongType(path, "a boolean", v);
  }
  out = v.get<bool>();
  return Status::Ok();
}

Status Read(const Json& v, const std::string& path, unsigned /*flags*/, std::optional<std::string>& out) {
  if (!v.is_string()) {
    return WrongType(path, "a string", v);
  }
  out = v.get<std::string>();
  return Status::Ok();
}

Status Read(const Json& v, const std::string& path, unsigned flags, std::optional<NamedCounts>& out);
// The hang object: validated against the hang report's schema, kept as JSON.
Status Read(const Json& v, const std::string& path, unsigned /*flags*/, std::optional<Json>& out) {
  auto h = hang::HangReportFromJson(v, "report key " + path);
  if (!h.ok()) {
    return h.status();
  }
  out = v;
  return Status::Ok();
}
template <class T>
Status Read(const Json& v, const std::string& path, unsigned flags, std::optional<std::optional<T>>& out);
template <class T>
Status Read(const Json& v, const std::string& path, unsigned flags, std::optional<std::vector<T>>& out);
template <class T>
Status Read(const Json& v, const std::string& path, unsigned flags, std::optional<T>& out);

// Checks that involve more than one key, run once a struct has been read.
template <class T>
Status Check(const T& /*model*/, const std::string& /*path*/) {
  return Status::Ok();
}

Status Check(const ReportModel& m, const std::string& /*path*/) {
  if (m.schema != kReportSchemaName) {
    return Bad("schema", "is \"" + m.schema.value_or("") + "\", expected \"" + kReportSchemaName + "\"");
  }
  if (m.world_size.value_or(0) < 0) {
    return Bad("world_size", "is negative");
  }
  return Status::Ok();
}

template <class T>
Status CheckBins(const std::optional<std::vector<T>>& values, const std::string& path, int64_t bins) {
  if (values && static_cast<int64_t>(values->size()) != bins) {
    return Bad(path, "has " + std::to_string(values->size()) + " entries, lateness.bins is " + std::to_string(bins));
  }
  return Status::Ok();
}

Status Check(const ReportModel::Lateness& l, const std::string& path) {
  const int64_t bins = l.bins.value_or(0);
  if (bins < 0) {
    return Bad(path + ".bins", "is negative");
  }
  const auto& ranks = l.ranks.value_or(std::vector<ReportModel::LatenessRank>());
  for (size_t i = 0; i < ranks.size(); ++i) {
    const std::string p = path + ".ranks[" + std::to_string(i) + "]";
    COMMPROF_RETURN_IF_ERROR(CheckBins(ranks[i].mean_lateness_ns, p + ".mean_lateness_ns", bins));
    COMMPROF_RETURN_IF_ERROR(CheckBins(ranks[i].times_last, p + ".times_last", bins));
  }
  return Status::Ok();
}

template <class T>
struct IsOptional : std::false_type {};
template <class U>
struct IsOptional<std::optional<U>> : std::true_type {};

class JsonReader {
 public:
  JsonReader(const Json& object, const std::string& path) : object_(object), prefix_(path.empty() ? "" : path + ".") {}

  template <class T>
  void operator()(const char* key, std::optional<T>& field, unsigned flags = 0) {
    if (!status_.ok()) {
      return;
    }
    const std::string path = prefix_ + key;
    auto it = object_.find(key);
    if constexpr (IsOptional<T>::value) {
      if (it != object_.end() && it->is_null()) {
        field.emplace();  // a nullable key (ReportModel::Step): present, and null
        return;
      }
    }
    if (it == object_.end() || it->is_null()) {
      if ((flags & kReportRequired) != 0) {
        status_ = Bad(path, it == object_.end() ? "missing" : "is null");
      }
      return;
    }
    status_ = Read(*it, path, flags, field);
  }
  const Status& status() const { return status_; }

 private:
  const Json& object_;
  std::string prefix_;
  Status status_;
};

Status Read(const Json& v, const std::string& path, unsigned /*flags*/, std::optional<NamedCounts>& out) {
  if (!v.is_object()) {
    return WrongType(path, "an object", v);
  }
  NamedCounts counts;
  for (auto it = v.begin(); it != v.end(); ++it) {
    std::optional<uint64_t> n;
    COMMPROF_RETURN_IF_ERROR(Read(it.value(), path + "." + it.key(), 0, n));
    counts.emplace_back(it.key(), n.value_or(0));
  }
  out = std::move(counts);
  return Status::Ok();
}

// An entry of a per-bin array: null is absent.
template <class T>
Status Read(const Json& v, const std::string& path, unsigned flags, std::optional<std::optional<T>>& out) {
  std::optional<T> inner;
  if (!v.is_null()) {
    COMMPROF_RETURN_IF_ERROR(Read(v, path, flags, inner));
  }
  out = inner;
  return Status::Ok();
}

// Arrays: `flags` apply to the entries (kReportInteger on an array of integers).
template <class T>
Status Read(const Json& v, const std::string& path, unsigned flags, std::optional<std::vector<T>>& out) {
  if (!v.is_array()) {
    return WrongType(path, "an array", v);
  }
  std::vector<T> entries;
  entries.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    std::optional<T> e;
    COMMPROF_RETURN_IF_ERROR(Read(v[i], path + "[" + std::to_string(i) + "]", flags & ~kReportRequired, e));
    entries.push_back(std::move(e).value_or(T()));
  }
  out = std::move(entries);
  return Status::Ok();
}

// Objects of the model: every key of its Fields(), then the checks across keys.
template <class T>
Status Read(const Json& v, const std::string& path, unsigned /*flags*/, std::optional<T>& out) {
  if (!v.is_object()) {
    return WrongType(path, "an object", v);
  }
  T model;
  JsonReader reader(v, path);
  T::Fields(model, reader);
  COMMPROF_RETURN_IF_ERROR(reader.status());
  COMMPROF_RETURN_IF_ERROR(Check(model, path));
  out = std::move(model);
  return Status::Ok();
}

}  // namespace

nlohmann::ordered_json ReportModelToJson(const ReportModel& model) { return ToJsonValue(model); }

Result<ReportModel> ReportModelFromJson(const nlohmann::ordered_json& json) {
  if (!json.is_object()) {
    return InvalidArgument(std::string("report: expected a JSON object, got ") + json.type_name());
  }
  std::optional<ReportModel> model;
  COMMPROF_RETURN_IF_ERROR(Read(json, "", 0, model));
  return std::move(model).value();
}

nlohmann::ordered_json ReportToJson(const JobReport& report) { return ReportModelToJson(BuildReportModel(report)); }

}  // namespace commprof
