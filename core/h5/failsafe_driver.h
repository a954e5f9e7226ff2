// A POSIX file driver for HDF5 (a virtual file driver, VFD) that the writer uses in place of the
// default "sec2" one. It writes the same bytes to the same file, but it never hands a write error
// back to HDF5: the first failing write or truncate (a full disk, a file size limit, EIO) is
// remembered with its errno and every later write is discarded.
//
// Why: HDF5 1.10 does not survive write errors. A failed flush leaves dirty metadata it retries at
// every call, prints its error stack each time, cannot close the file, and its atexit handler then
// frees the half-closed file again and crashes (the SIGSEGV seen with a full disk). It also writes
// metadata in place after the failure, so the file on disk ends up pointing at chunks that were
// never written (rows of zeros). With this driver HDF5 sees every write succeed, closes the file
// cleanly, and the file on disk stays as it was when the first write failed, which is what a
// writer killed at that moment leaves: readable up to the last complete flush. The writer asks
// the driver after each step whether a write failed and then stops writing (hdf5_writer.cc).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>

namespace commprof::h5 {

// A file access property list selecting the fail-safe driver (the caller closes it); negative
// when the driver cannot be registered.
hid_t FailSafeAccessList();

// The driver's state of an open file; nullptr for a file not opened through FailSafeAccessList.
// Valid until the file is closed.
struct FailSafeFile;
const FailSafeFile* FailSafeOf(hid_t file);

// The errno of the first write or truncate that failed on the file, 0 while none has.
int WriteErrno(const FailSafeFile* file);

// Overwrites `size` bytes at byte `offset` of the file at `path` in place (pwrite on a fresh
// descriptor, no HDF5): how the writer records a write failure in a block it allocated when the
// file was created, when HDF5 can no longer write anything. Returns the errno, 0 on success.
int OverwriteInPlace(const std::string& path, uint64_t offset, const void* data, size_t size);

}  // namespace commprof::h5
