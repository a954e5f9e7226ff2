// Thin RAII helpers over the HDF5 C API, shared by the writer (aggregator) and the readers
// (analysis): they turn the schema (core/schema/) into HDF5 types and attributes, so both sides
// agree on one definition of the file layout (docs/file-format.md).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "core/schema/columns.h"
#include "core/schema/file_schema.h"

namespace commprof::h5 {

// Owns one hid_t and closes it with the right H5?close.
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  Handle(Handle&& o) noexcept : id_(std::exchange(o.id_, H5I_INVALID_HID)) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      Reset();
      id_ = std::exchange(o.id_, H5I_INVALID_HID);
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { Reset(); }

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void Reset();
  // Gives up ownership: the id stays open (for process-lifetime types).
  hid_t Release() { return std::exchange(id_, H5I_INVALID_HID); }

 private:
  hid_t id_ = H5I_INVALID_HID;
};

// The compound type of one event record (schema::kEventColumns).
hid_t EventType();      // a committed-once, process-lifetime type id; do not close
hid_t VarStringType();  // variable-length UTF-8 string type; do not close

// A transfer property list for reading or writing `rows` rows that need a type conversion
// (variable-length strings, compounds): HDF5's default conversion buffers are 1 MiB each, zeroed on
// every H5Dread/H5Dwrite, which cost a few strings far more than the strings themselves. Sized
// here to the rows (16 bytes a row at least, 1 MiB at most, as the default).
// Used as a temporary: H5Dwrite(d, type, ..., h5::Transfer(n).id(), data).
class Transfer {
 public:
  explicit Transfer(size_t rows, size_t row_bytes = 16);
  hid_t id() const { return list_.valid() ? list_.get() : H5P_DEFAULT; }

 private:
  Handle list_;
};

// The compound type of a row of `size` bytes with these columns (the caller owns it).
Handle BuildCompound(size_t size, std::span<const schema::Column> columns);

// Attributes (created or overwritten).
bool WriteAttr(hid_t obj, const char* name, const std::string& value);
bool WriteAttr(hid_t obj, const char* name, uint64_t value);
bool WriteAttr(hid_t obj, const char* name, int64_t value);
bool WriteAttr(hid_t obj, const char* name, double value);
std::optional<std::string> ReadStringAttr(hid_t obj, const char* name);
std::optional<int64_t> ReadIntAttr(hid_t obj, const char* name);
std::optional<double> ReadDoubleAttr(hid_t obj, const char* name);

// Schema attributes: the name and the value type come from the schema (core/schema/).
inline bool Write(hid_t obj, schema::Attr<std::string> a, const std::string& v) { return WriteAttr(obj, a.name, v); }
inline bool Write(hid_t obj, schema::Attr<uint64_t> a, uint64_t v) { return WriteAttr(obj, a.name, v); }
inline bool Write(hid_t obj, schema::Attr<int64_t> a, int64_t v) { return WriteAttr(obj, a.name, v); }
inline bool Write(hid_t obj, schema::Attr<double> a, double v) { return WriteAttr(obj, a.name, v); }
inline std::optional<std::string> Read(hid_t obj, schema::Attr<std::string> a) { return ReadStringAttr(obj, a.name); }
// Integers read through int64 as before the schema: a uint64 attribute holds no value above 2^63.
inline std::optional<uint64_t> Read(hid_t obj, schema::Attr<uint64_t> a) {
  auto v = ReadIntAttr(obj, a.name);
  return v ? std::optional<uint64_t>(static_cast<uint64_t>(*v)) : std::nullopt;
}
inline std::optional<int64_t> Read(hid_t obj, schema::Attr<int64_t> a) { return ReadIntAttr(obj, a.name); }
inline std::optional<double> Read(hid_t obj, schema::Attr<double> a) { return ReadDoubleAttr(obj, a.name); }

// Silences HDF5's own error stack printing; we report errors ourselves with file and object.
void QuietErrors();

// Reader side: what HDF5's error stack says about the call that just failed, so a reader can tell
// a truncated file from one locked by a running writer. `detail` is the innermost description.
struct ErrorStackSummary {
  bool truncated = false;              // H5E_TRUNCATED: the file is shorter than its superblock says
  bool locked = false;                 // H5E_CANTLOCKFILE: another process holds the file lock
  std::optional<uint64_t> stored_eof;  // with `truncated`: the size the superblock records
  std::string detail;
};
ErrorStackSummary SummarizeErrorStack();

// Reader side: the name of the idx-th link of `group` in name order, whatever its length
// (nullopt when it cannot be read).
std::optional<std::string> LinkNameByIndex(hid_t group, hsize_t idx);

}  // namespace commprof::h5
