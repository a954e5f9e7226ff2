// A table's columns, stated once next to its row struct: name, type and offset come from the
// member itself, so the HDF5 compound type (core/h5/h5_util.h BuildCompound) and the docs check
// (tests/unit/core/schema_doc_test.cc) derive from the same list as the rows written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

namespace commprof::schema {

enum class ColumnType : uint8_t { kU8, kU16, kU32, kI32, kU64, kI64, kF64, kText };

struct Column {
  const char* name;
  ColumnType type;
  size_t offset;
  size_t size;      // bytes: the fixed length of a kText column, else the scalar's size
  const char* doc;  // its meaning, as docs/file-format.md states it
};

template <typename T>
constexpr ColumnType ColumnTypeOf() {
  if constexpr (std::is_array_v<T>) {
    static_assert(std::is_same_v<std::remove_extent_t<T>, char>, "only char arrays (fixed-length text)");
    return ColumnType::kText;
  } else if constexpr (std::is_same_v<T, uint8_t>) {
    return ColumnType::kU8;
  } else if constexpr (std::is_same_v<T, uint16_t>) {
    return ColumnType::kU16;
  } else if constexpr (std::is_same_v<T, uint32_t>) {
    return ColumnType::kU32;
  } else if constexpr (std::is_same_v<T, int32_t>) {
    return ColumnType::kI32;
  } else if constexpr (std::is_same_v<T, uint64_t>) {
    return ColumnType::kU64;
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return ColumnType::kI64;
  } else {
    static_assert(std::is_same_v<T, double>, "no column type for this member type");
    return ColumnType::kF64;
  }
}

// The docs' spelling of a column type: `uint64`, `float64`, `str[24]`, ...
const char* ColumnTypeName(ColumnType type);

// X-macro helpers: a table is a list X(Struct, type, name, doc); these expand it into the struct's
// members and into its column list.
#define COMMPROF_SCHEMA_MEMBER(Struct, type, name, doc) type name;
#define COMMPROF_SCHEMA_COLUMN(Struct, type, name, doc)                                                             \
  ::commprof::schema::Column{#name, ::commprof::schema::ColumnTypeOf<type>(), offsetof(Struct, name), sizeof(type), \
                             doc},

}  // namespace commprof::schema
