#include "core/h5/failsafe_driver.h"

#include <H5FDpublic.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>

namespace commprof::h5 {
namespace {

// Offsets are off_t: the largest address is the largest positive off_t, as for sec2.
constexpr haddr_t kMaxAddr = (static_cast<haddr_t>(1) << (8 * sizeof(off_t) - 1)) - 1;

}  // namespace

struct FailSafeFile {
  H5FD_t pub;  // first: HDF5 hands this pointer to every callback
  int fd = -1;
  haddr_t eoa = 0;  // end of the address space HDF5 has allocated
  haddr_t eof = 0;  // end of the file as HDF5 should believe it
  dev_t device = 0;
  ino_t inode = 0;
  int write_errno = 0;  // sticky: the first failed write or truncate
};

namespace {

FailSafeFile* Self(H5FD_t* f) { return reinterpret_cast<FailSafeFile*>(f); }
const FailSafeFile* Self(const H5FD_t* f) { return reinterpret_cast<const FailSafeFile*>(f); }

bool AddrOverflow(haddr_t addr, size_t size) {
  return addr == HADDR_UNDEF || addr > kMaxAddr || size > kMaxAddr || addr + size > kMaxAddr;
}

H5FD_t* Open(const char* name, unsigned flags, hid_t /*fapl*/, haddr_t maxaddr) {
  if (name == nullptr || *name == '\0' || maxaddr == 0 || maxaddr == HADDR_UNDEF || maxaddr > kMaxAddr) {
    return nullptr;
  }
  int oflags = (flags & H5F_ACC_RDWR) != 0 ? O_RDWR : O_RDONLY;
  if ((flags & H5F_ACC_TRUNC) != 0) {
    oflags |= O_TRUNC;
  }
  if ((flags & H5F_ACC_CREAT) != 0) {
    oflags |= O_CREAT;
  }
  if ((flags & H5F_ACC_EXCL) != 0) {
    oflags |= O_EXCL;
  }
  int fd = ::open(name, oflags | O_CLOEXEC, 0666);
  if (fd < 0) {
    return nullptr;
  }
  struct stat st {};
  if (::fstat(fd, &st) < 0) {
    ::close(fd);
    return nullptr;
  }
  auto* f = new (std::nothrow) FailSafeFile();
  if (f == nullptr) {
    ::close(fd);
    return nullptr;
  }
  f->fd = fd;
  f->eof = static_cast<haddr_t>(st.st_size);
  f->device = st.st_dev;
  f->inode = st.st_ino;
  return &f->pub;
}

herr_t Close(H5FD_t* file) {
  FailSafeFile* f = Self(file);
  int rc = ::close(f->fd);
  delete f;
  return rc < 0 ? -1 : 0;
}

int Compare(const H5FD_t* a, const H5FD_t* b) {
  const FailSafeFile* x = Self(a);
  const FailSafeFile* y = Self(b);
  if (x->device != y->device) {
    return x->device < y->device ? -1 : 1;
  }
  if (x->inode != y->inode) {
    return x->inode < y->inode ? -1 : 1;
  }
  return 0;
}

herr_t Query(const H5FD_t* /*file*/, unsigned long* flags) {
  if (flags != nullptr) {
    // What sec2 declares, less POSIX_COMPAT_HANDLE (get_handle returns the driver's own state).
    *flags = H5FD_FEAT_AGGREGATE_METADATA | H5FD_FEAT_ACCUMULATE_METADATA | H5FD_FEAT_DATA_SIEVE |
             H5FD_FEAT_AGGREGATE_SMALLDATA | H5FD_FEAT_DEFAULT_VFD_COMPATIBLE;
  }
  return 0;
}

haddr_t GetEoa(const H5FD_t* file, H5FD_mem_t /*type*/) { return Self(file)->eoa; }

herr_t SetEoa(H5FD_t* file, H5FD_mem_t /*type*/, haddr_t addr) {
  if (addr > kMaxAddr) {
    return -1;
  }
  Self(file)->eoa = addr;
  return 0;
}

haddr_t GetEof(const H5FD_t* file, H5FD_mem_t /*type*/) { return Self(file)->eof; }

herr_t GetHandle(H5FD_t* file, hid_t /*fapl*/, void** handle) {
  if (handle == nullptr) {
    return -1;
  }
  *handle = Self(file);
  return 0;
}

herr_t Read(H5FD_t* file, H5FD_mem_t /*type*/, hid_t /*dxpl*/, haddr_t addr, size_t size, void* buf) {
  FailSafeFile* f = Self(file);
  if (AddrOverflow(addr, size)) {
    return -1;
  }
  auto* out = static_cast<unsigned char*>(buf);
  while (size > 0) {
    ssize_t n = ::pread(f->fd, out, size, static_cast<off_t>(addr));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return -1;
    }
    if (n == 0) {
      // Past the end of the file (or of what a discarded write would have made it): zeros, as sec2.
      std::memset(out, 0, size);
      break;
    }
    out += n;
    addr += static_cast<haddr_t>(n);
    size -= static_cast<size_t>(n);
  }
  return 0;
}

herr_t Write(H5FD_t* file, H5FD_mem_t /*type*/, hid_t /*dxpl*/, haddr_t addr, size_t size, const void* buf) {
  FailSafeFile* f = Self(file);
  if (AddrOverflow(addr, size)) {
    return -1;
  }
  const haddr_t end = addr + size;
  if (f->write_errno == 0) {
    const auto* in = static_cast<const unsigned char*>(buf);
    while (size > 0) {
      ssize_t n = ::pwrite(f->fd, in, size, static_cast<off_t>(addr));
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n <= 0) {
        f->write_errno = n < 0 ? errno : EIO;
        break;
      }
      in += n;
      addr += static_cast<haddr_t>(n);
      size -= static_cast<size_t>(n);
    }
  }
  // Failed or discarded, HDF5 is told the write happened: it must reach a clean close.
  if (end > f->eof) {
    f->eof = end;
  }
  return 0;
}

herr_t Truncate(H5FD_t* file, hid_t /*dxpl*/, hbool_t /*closing*/) {
  FailSafeFile* f = Self(file);
  if (f->write_errno != 0 || f->eoa == f->eof) {
    return 0;
  }
  if (::ftruncate(f->fd, static_cast<off_t>(f->eoa)) < 0) {
    f->write_errno = errno;
    return 0;
  }
  f->eof = f->eoa;
  return 0;
}

herr_t Lock(H5FD_t* file, hbool_t rw) {
  // As sec2: an exclusive lock for writers, shared for readers, never waiting; file systems
  // without flock (ENOSYS) are not an error.
  if (::flock(Self(file)->fd, (rw ? LOCK_EX : LOCK_SH) | LOCK_NB) < 0 && errno != ENOSYS) {
    return -1;
  }
  return 0;
}

herr_t Unlock(H5FD_t* file) {
  if (::flock(Self(file)->fd, LOCK_UN) < 0 && errno != ENOSYS) {
    return -1;
  }
  return 0;
}

H5FD_class_t MakeClass() {
  H5FD_class_t c{};
  c.name = "commprof_failsafe";
  c.maxaddr = kMaxAddr;
  c.fc_degree = H5F_CLOSE_WEAK;
  c.open = Open;
  c.close = Close;
  c.cmp = Compare;
  c.query = Query;
  c.get_eoa = GetEoa;
  c.set_eoa = SetEoa;
  c.get_eof = GetEof;
  c.get_handle = GetHandle;
  c.read = Read;
  c.write = Write;
  c.truncate = Truncate;
  c.lock = Lock;
  c.unlock = Unlock;
  // H5FD_FLMAP_DICHOTOMY, as sec2: metadata and raw data from separate free lists.
  for (auto& m : c.fl_map) {
    m = H5FD_MEM_SUPER;
  }
  c.fl_map[H5FD_MEM_DRAW] = H5FD_MEM_DRAW;
  return c;
}

hid_t DriverId() {
  static const H5FD_class_t kClass = MakeClass();
  // Registered once per process, kept for its lifetime.
  static const hid_t kId = H5FDregister(&kClass);
  return kId;
}

}  // namespace

hid_t FailSafeAccessList() {
  hid_t id = DriverId();
  if (id < 0) {
    return H5I_INVALID_HID;
  }
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  if (fapl < 0) {
    return H5I_INVALID_HID;
  }
  if (H5Pset_driver(fapl, id, nullptr) < 0) {
    H5Pclose(fapl);
    return H5I_INVALID_HID;
  }
  return fapl;
}

const FailSafeFile* FailSafeOf(hid_t file) {
  hid_t fapl = H5Fget_access_plist(file);
  if (fapl < 0) {
    return nullptr;
  }
  bool ours = H5Pget_driver(fapl) == DriverId();
  void* handle = nullptr;
  bool got = ours && H5Fget_vfd_handle(file, fapl, &handle) >= 0;
  H5Pclose(fapl);
  return got ? static_cast<const FailSafeFile*>(handle) : nullptr;
}

int WriteErrno(const FailSafeFile* file) { return file != nullptr ? file->write_errno : 0; }

int OverwriteInPlace(const std::string& path, uint64_t offset, const void* data, size_t size) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    return errno;
  }
  int err = 0;
  const auto* p = static_cast<const unsigned char*>(data);
  while (size > 0) {
    ssize_t n = ::pwrite(fd, p, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      err = n < 0 ? errno : EIO;
      break;
    }
    p += n;
    offset += static_cast<uint64_t>(n);
    size -= static_cast<size_t>(n);
  }
  if (::close(fd) < 0 && err == 0) {
    err = errno;
  }
  return err;
}

}  // namespace commprof::h5
