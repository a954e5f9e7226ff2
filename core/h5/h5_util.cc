#include "core/h5/h5_util.h"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "commprof/event.h"
#include "core/h5/lz4_filter.h"

namespace commprof::h5 {

void Handle::Reset() {
  if (id_ < 0) {
    return;
  }
  switch (H5Iget_type(id_)) {
    case H5I_FILE:
      H5Fclose(id_);
      break;
    case H5I_GROUP:
      H5Gclose(id_);
      break;
    case H5I_DATASET:
      H5Dclose(id_);
      break;
    case H5I_DATASPACE:
      H5Sclose(id_);
      break;
    case H5I_DATATYPE:
      H5Tclose(id_);
      break;
    case H5I_ATTR:
      H5Aclose(id_);
      break;
    case H5I_GENPROP_LST:
      H5Pclose(id_);
      break;
    default:
      break;
  }
  id_ = H5I_INVALID_HID;
}

namespace {

hid_t NativeType(schema::ColumnType type) {
  switch (type) {
    case schema::ColumnType::kU8:
      return H5T_NATIVE_UINT8;
    case schema::ColumnType::kU16:
      return H5T_NATIVE_UINT16;
    case schema::ColumnType::kU32:
      return H5T_NATIVE_UINT32;
    case schema::ColumnType::kI32:
      return H5T_NATIVE_INT32;
    case schema::ColumnType::kU64:
      return H5T_NATIVE_UINT64;
    case schema::ColumnType::kI64:
      return H5T_NATIVE_INT64;
    case schema::ColumnType::kF64:
      return H5T_NATIVE_DOUBLE;
    case schema::ColumnType::kText:
      break;
  }
  return H5I_INVALID_HID;
}

}  // namespace

Transfer::Transfer(size_t rows, size_t row_bytes) : list_(H5Pcreate(H5P_DATASET_XFER)) {
  constexpr size_t kDefault = size_t{1} << 20;  // HDF5's H5D_TEMP_BUF_SIZE
  const size_t bytes = std::clamp<size_t>(rows * std::max<size_t>(row_bytes, 16), 4096, kDefault);
  if (list_.valid()) {
    (void)H5Pset_buffer(list_.get(), bytes, nullptr, nullptr);
  }
}

Handle BuildCompound(size_t size, std::span<const schema::Column> columns) {
  Handle t(H5Tcreate(H5T_COMPOUND, size));
  for (const schema::Column& c : columns) {
    if (c.type == schema::ColumnType::kText) {
      // Fixed-length, NUL-terminated: h5py reads it as bytes without a string-type registry.
      Handle text(H5Tcopy(H5T_C_S1));
      H5Tset_size(text.get(), c.size);
      H5Tset_strpad(text.get(), H5T_STR_NULLTERM);
      H5Tinsert(t.get(), c.name, c.offset, text.get());
    } else {
      H5Tinsert(t.get(), c.name, c.offset, NativeType(c.type));
    }
  }
  return t;
}

hid_t EventType() {
  static_assert(sizeof(commprof_event) == 64, "the events compound type has no padding");
  // Every reader and writer of an events table comes here first, so the table's codec is known
  // to HDF5 before its first chunk is read or written.
  RegisterLz4Filter();
  // Released on purpose: process-lifetime, handed out to every reader and writer.
  static hid_t type = BuildCompound(sizeof(commprof_event), schema::kEventColumns).Release();
  return type;
}

hid_t VarStringType() {
  static hid_t type = [] {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    return t;
  }();
  return type;
}

namespace {

bool WriteScalarAttr(hid_t obj, const char* name, hid_t type, const void* value) {
  if (H5Aexists(obj, name) > 0) {
    H5Adelete(obj, name);
  }
  Handle space(H5Screate(H5S_SCALAR));
  Handle attr(H5Acreate2(obj, name, type, space.get(), H5P_DEFAULT, H5P_DEFAULT));
  return attr.valid() && H5Awrite(attr.get(), type, value) >= 0;
}

}  // namespace

bool WriteAttr(hid_t obj, const char* name, const std::string& value) {
  const char* p = value.c_str();
  return WriteScalarAttr(obj, name, VarStringType(), &p);
}
bool WriteAttr(hid_t obj, const char* name, uint64_t value) {
  return WriteScalarAttr(obj, name, H5T_NATIVE_UINT64, &value);
}
bool WriteAttr(hid_t obj, const char* name, int64_t value) {
  return WriteScalarAttr(obj, name, H5T_NATIVE_INT64, &value);
}
bool WriteAttr(hid_t obj, const char* name, double value) {
  return WriteScalarAttr(obj, name, H5T_NATIVE_DOUBLE, &value);
}

std::optional<std::string> ReadStringAttr(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) <= 0) {
    return std::nullopt;
  }
  Handle attr(H5Aopen(obj, name, H5P_DEFAULT));
  Handle ftype(H5Aget_type(attr.get()));
  if (H5Tget_class(ftype.get()) != H5T_STRING) {
    return std::nullopt;
  }
  if (H5Tis_variable_str(ftype.get()) > 0) {
    char* p = nullptr;
    if (H5Aread(attr.get(), VarStringType(), &p) < 0) {
      return std::nullopt;
    }
    std::string s = p != nullptr ? p : "";
    H5free_memory(p);
    return s;
  }
  size_t n = H5Tget_size(ftype.get());
  std::vector<char> buf(n + 1, '\0');
  Handle mtype(H5Tcopy(H5T_C_S1));
  H5Tset_size(mtype.get(), n + 1);
  if (H5Aread(attr.get(), mtype.get(), buf.data()) < 0) {
    return std::nullopt;
  }
  return std::string(buf.data());
}

std::optional<int64_t> ReadIntAttr(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) <= 0) {
    return std::nullopt;
  }
  Handle attr(H5Aopen(obj, name, H5P_DEFAULT));
  int64_t v = 0;
  if (H5Aread(attr.get(), H5T_NATIVE_INT64, &v) < 0) {
    return std::nullopt;
  }
  return v;
}

std::optional<double> ReadDoubleAttr(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) <= 0) {
    return std::nullopt;
  }
  Handle attr(H5Aopen(obj, name, H5P_DEFAULT));
  double v = 0;
  if (H5Aread(attr.get(), H5T_NATIVE_DOUBLE, &v) < 0) {
    return std::nullopt;
  }
  return v;
}

void QuietErrors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

namespace {

herr_t SummarizeError(unsigned /*n*/, const H5E_error2_t* e, void* data) {
  auto* s = static_cast<ErrorStackSummary*>(data);
  if (e->min_num == H5E_TRUNCATED) {
    s->truncated = true;
    // "truncated file: eof = 403072, sblock->base_addr = 0, stored_eof = 806144"
    if (const char* at = e->desc != nullptr ? std::strstr(e->desc, "stored_eof = ") : nullptr; at != nullptr) {
      s->stored_eof = std::strtoull(at + std::strlen("stored_eof = "), nullptr, 10);
    }
  }
  if (e->min_num == H5E_CANTLOCKFILE) {
    s->locked = true;
  }
  if (e->desc != nullptr) {
    s->detail = e->desc;  // walked downward: the last one seen is the innermost
  }
  return 0;
}

}  // namespace

ErrorStackSummary SummarizeErrorStack() {
  ErrorStackSummary s;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, SummarizeError, &s);
  H5Eclear2(H5E_DEFAULT);
  return s;
}

std::optional<std::string> LinkNameByIndex(hid_t group, hsize_t idx) {
  ssize_t n = H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, idx, nullptr, 0, H5P_DEFAULT);
  if (n < 0) {
    return std::nullopt;
  }
  std::string name(static_cast<size_t>(n) + 1, '\0');
  if (H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, idx, name.data(), name.size(), H5P_DEFAULT) < 0) {
    return std::nullopt;
  }
  name.resize(static_cast<size_t>(n));
  return name;
}

}  // namespace commprof::h5
