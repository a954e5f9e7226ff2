#include "collector/cupti_library.h"

#include <dlfcn.h>

#include <mutex>

namespace commprof {

namespace {

#ifndef COMMPROF_CUPTI_LIBRARY_PATH
#define COMMPROF_CUPTI_LIBRARY_PATH ""
#endif

template <typename Fn>
bool Resolve(void* handle, const char* symbol, Fn& out, std::string& error) {
  out = reinterpret_cast<Fn>(dlsym(handle, symbol));
  if (out != nullptr) {
    return true;
  }
  error = std::string("dlsym(") + symbol + ") failed in libcupti";
  return false;
}

struct Loaded {
  CuptiLibrary table;
  bool ok = false;
  std::string error;
};

Loaded LoadOnce() {
  Loaded l;
  // RTLD_LOCAL: CUPTI's symbols must not leak into the application's namespace.
  void* handle = dlopen("libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
  std::string first_error = handle == nullptr ? dlerror() : "";
  if (handle == nullptr && COMMPROF_CUPTI_LIBRARY_PATH[0] != '\0') {
    handle = dlopen(COMMPROF_CUPTI_LIBRARY_PATH, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      first_error += std::string("; ") + dlerror();
    }
  }
  if (handle == nullptr) {
    l.error = "dlopen(libcupti.so.13) failed: " + first_error;
    return l;
  }
  CuptiLibrary& t = l.table;
  l.ok = Resolve(handle, "cuptiActivityGetNextRecord", t.GetNextRecord, l.error) &&
         Resolve(handle, "cuptiActivityEnable", t.Enable, l.error) &&
         Resolve(handle, "cuptiActivityDisable", t.Disable, l.error) &&
         Resolve(handle, "cuptiActivityEnableRuntimeApi", t.EnableRuntimeApi, l.error) &&
         Resolve(handle, "cuptiActivityEnableDriverApi", t.EnableDriverApi, l.error) &&
         Resolve(handle, "cuptiActivityRegisterCallbacks", t.RegisterCallbacks, l.error) &&
         Resolve(handle, "cuptiActivityRegisterTimestampCallback", t.RegisterTimestampCallback, l.error) &&
         Resolve(handle, "cuptiActivitySetAttribute", t.SetAttribute, l.error) &&
         Resolve(handle, "cuptiActivityFlushAll", t.FlushAll, l.error) &&
         Resolve(handle, "cuptiActivityGetNumDroppedRecords", t.GetNumDroppedRecords, l.error) &&
         Resolve(handle, "cuptiGetCallbackName", t.GetCallbackName, l.error) &&
         Resolve(handle, "cuptiGetResultString", t.GetResultString, l.error);
  // The handle stays open for the process's life: CUPTI's worker thread runs inside it.
  return l;
}

}  // namespace

const CuptiLibrary* LoadCuptiLibrary(std::string& error) {
  static const Loaded loaded = LoadOnce();  // thread-safe, once per process
  if (!loaded.ok) {
    error = loaded.error;
    return nullptr;
  }
  return &loaded.table;
}

std::string CuptiResultText(const CuptiLibrary& lib, CUptiResult result) {
  const char* text = nullptr;
  if (lib.GetResultString == nullptr || lib.GetResultString(result, &text) != CUPTI_SUCCESS || text == nullptr) {
    text = "CUPTI_ERROR_?";
  }
  return std::string(text) + " (" + std::to_string(static_cast<int>(result)) + ")";
}

}  // namespace commprof
