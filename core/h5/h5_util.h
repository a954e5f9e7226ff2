// Thin RAII and schema helpers over the HDF5 C API, shared by the writer (aggregator) and the
// reader (analysis), so both agree on one definition of the file layout (docs/file-format.md).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace commprof::h5 {

inline constexpr const char* kFormatName = "commprof";
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr hsize_t kEventChunk = 16384;  // reference/hdf5.md: 16 Ki records writes fastest

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

 private:
  hid_t id_ = H5I_INVALID_HID;
};

// The compound type of one event record (names = the fields of commprof_event).
hid_t EventType();      // a committed-once, process-lifetime type id; do not close
hid_t VarStringType();  // variable-length UTF-8 string type; do not close

// Attributes (created or overwritten).
bool WriteAttr(hid_t obj, const char* name, const std::string& value);
bool WriteAttr(hid_t obj, const char* name, uint64_t value);
bool WriteAttr(hid_t obj, const char* name, int64_t value);
bool WriteAttr(hid_t obj, const char* name, double value);
std::optional<std::string> ReadStringAttr(hid_t obj, const char* name);
std::optional<int64_t> ReadIntAttr(hid_t obj, const char* name);
std::optional<double> ReadDoubleAttr(hid_t obj, const char* name);

// Silences HDF5's own error stack printing; we report errors ourselves with file and object.
void QuietErrors();

}  // namespace commprof::h5
