// Bytes that one process of a distributed analysis (docs/scale.md#distributed-analysis) sends to
// another: trivially copyable values in their in-memory layout, vectors and strings with a length
// word in front. Both ends are the same build of commprof (one MPI job); a reader returns false on
// anything short or oversized rather than reading past the end, so a message from another build
// is refused, never misread into figures.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/status.h"

namespace commprof {

class PartWriter {
 public:
  template <typename T>
  void Put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  template <typename T>
  void PutVector(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    Put<uint64_t>(v.size());
    if (!v.empty()) {  // an empty vector's data() may be null, which memcpy must not be given
      out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
    }
  }
  void PutString(const std::string& s) {
    Put<uint64_t>(s.size());
    out_.append(s);
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class PartReader {
 public:
  explicit PartReader(std::string_view in) : in_(in) {}
  template <typename T>
  bool Get(T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (in_.size() - pos_ < sizeof(T)) {
      return false;
    }
    std::memcpy(&v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  template <typename T>
  bool GetVector(std::vector<T>& v) {
    uint64_t n = 0;
    if (!Get(n) || n > (in_.size() - pos_) / sizeof(T)) {
      return false;
    }
    v.resize(n);
    if (n > 0) {  // an empty vector's data() may be null, which memcpy must not be given
      std::memcpy(v.data(), in_.data() + pos_, n * sizeof(T));
    }
    pos_ += n * sizeof(T);
    return true;
  }
  bool GetString(std::string& s) {
    uint64_t n = 0;
    if (!Get(n) || n > in_.size() - pos_) {
      return false;
    }
    s.assign(in_.substr(pos_, n));
    pos_ += n;
    return true;
  }
  // A count of records that follow, each at least one byte: refused when more than the bytes left.
  bool GetCount(uint64_t& n) { return Get(n) && n <= in_.size() - pos_; }
  bool done() const { return pos_ == in_.size(); }

 private:
  std::string_view in_;
  size_t pos_ = 0;
};

// The head of a part: what it is (magic, kind), the record sizes both ends must agree on (layout)
// and the status its sender ended in, so an error crosses as itself; the payload follows when the
// status is OK.
inline void PutPartHead(PartWriter& w, uint32_t magic, uint32_t kind, uint64_t layout, const Status& st) {
  w.Put(magic);
  w.Put(kind);
  w.Put(layout);
  w.Put(static_cast<uint32_t>(st.code()));
  w.PutString(st.message());
}

// The status a part's head carries, or `malformed` when the head is not the one expected.
inline Status GetPartHead(PartReader& r, uint32_t magic, uint32_t kind, uint64_t layout, Status malformed) {
  uint32_t got_magic = 0, got_kind = 0, code = 0;
  uint64_t got_layout = 0;
  std::string message;
  if (!r.Get(got_magic) || !r.Get(got_kind) || !r.Get(got_layout) || !r.Get(code) || !r.GetString(message) ||
      got_magic != magic || got_kind != kind || got_layout != layout ||
      code > static_cast<uint32_t>(StatusCode::kInternal)) {
    return malformed;
  }
  return Status(static_cast<StatusCode>(code), std::move(message));
}

}  // namespace commprof
