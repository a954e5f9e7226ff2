#include "core/schema/columns.h"
#include "core/schema/file_schema.h"

namespace commprof::schema {

const char* ColumnTypeName(ColumnType type) {
  switch (type) {
    case ColumnType::kU8:
      return "uint8";
    case ColumnType::kU16:
      return "uint16";
    case ColumnType::kU32:
      return "uint32";
    case ColumnType::kI32:
      return "int32";
    case ColumnType::kU64:
      return "uint64";
    case ColumnType::kI64:
      return "int64";
    case ColumnType::kF64:
      return "float64";
    case ColumnType::kText:
      return "str";
  }
  return "?";
}

const char* AttrTypeName(AttrType type) {
  switch (type) {
    case AttrType::kString:
      return "str";
    case AttrType::kUint64:
      return "uint64";
    case AttrType::kInt64:
      return "int64";
    case AttrType::kFloat64:
      return "float64";
  }
  return "?";
}

}  // namespace commprof::schema
