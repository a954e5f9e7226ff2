// The Fortran MPI bindings, intercepted (docs/mpi-bindings.md).
//
// Open MPI's Fortran libraries call the PMPI_ layer directly, so a Fortran program never reaches
// the C wrappers of mpi_wrappers.cc. As mpiP and Score-P do, libcommprof.so defines the Fortran
// symbols itself; being preloaded, its definitions win. Each entry point converts the Fortran
// handles and sentinels and calls the C MPI_Xxx function by name: our wrapper where there is one
// (it records, then calls PMPI_Xxx), Open MPI's own MPI_Xxx where there is none yet.
//
// Names, one implementation each:
//  - mpif.h and `use mpi`: MPI_XXX, mpi_xxx, mpi_xxx_, mpi_xxx__ (every mangling Open MPI exports);
//  - `use mpi_f08`: Open MPI 4.1's mpi_xxx_f08_ wrappers (libmpi_usempif08) call ompi_xxx_f, the
//    mpif.h implementation in libmpi_mpifh, through the PLT; we define ompi_xxx_f too. The f08
//    wrappers have already turned their buffers into plain addresses and their handles into the
//    integers (%MPI_VAL) the mpif.h layer takes, so both layers share one signature. The Test
//    family and Cart_create are the exception: their f08 wrappers convert LOGICALs in Fortran and
//    call pmpi_xxx_, which we must not take over (that is the profiling layer of other tools), so
//    their mpi_xxx_f08_ names, which the program calls itself, are intercepted instead.
#include <mpi.h>

#include <cstddef>
#include <vector>

namespace {

// Integer arrays (counts, displacements, dims, indices) are passed through as int arrays; the
// Open MPI build this links against has MPI_Fint == int (an -fdefault-integer-8 build would not).
static_assert(sizeof(MPI_Fint) == sizeof(int), "Fortran INTEGER arrays are passed to C as int arrays");

#ifdef MPI_F_STATUS_SIZE
constexpr size_t kStatusSize = MPI_F_STATUS_SIZE;
#else
// Open MPI's Fortran status is the C MPI_Status read as INTEGERs (MPI_STATUS_SIZE = 6 in 4.1).
constexpr size_t kStatusSize = sizeof(MPI_Status) / sizeof(MPI_Fint);
#endif

}  // namespace

// Open MPI's Fortran sentinels are the addresses of common blocks (mpif-sentinels.h), defined by
// libmpi and by every Fortran program that names them; the dynamic linker binds all references to
// the program's copy, so the address the program passes is the one our references resolve to.
// Weak: each mangling may be absent, and another MPI has other names.
#define COMMPROF_FORTRAN_SENTINEL(name) extern "C" __attribute__((weak, visibility("default"))) MPI_Fint name;
COMMPROF_FORTRAN_SENTINEL(MPI_FORTRAN_BOTTOM)
COMMPROF_FORTRAN_SENTINEL(mpi_fortran_bottom)
COMMPROF_FORTRAN_SENTINEL(mpi_fortran_bottom_)
COMMPROF_FORTRAN_SENTINEL(mpi_fortran_bottom__)
COMMPROF_FORTRAN_SENTINEL(MPI_FORTRAN_IN_PLACE)
COMMPROF_FORTRAN_SENTINEL(mpi_fortran_in_place)
COMMPROF_FORTRAN_SENTINEL(mpi_fortran_in_place_)
COMMPROF_FORTRAN_SENTINEL(mpi_fortran_in_place__)
COMMPROF_FORTRAN_SENTINEL(MPI_FORTRAN_STATUS_IGNORE)
COMMPROF_FORTRAN_SENTINEL(mpi_fortran_status_ignore)
COMMPROF_FORTRAN_SENTINEL(mpi_fortran_status_ignore_)
COMMPROF_FORTRAN_SENTINEL(mpi_fortran_status_ignore__)
COMMPROF_FORTRAN_SENTINEL(MPI_FORTRAN_STATUSES_IGNORE)
COMMPROF_FORTRAN_SENTINEL(mpi_fortran_statuses_ignore)
COMMPROF_FORTRAN_SENTINEL(mpi_fortran_statuses_ignore_)
COMMPROF_FORTRAN_SENTINEL(mpi_fortran_statuses_ignore__)
#undef COMMPROF_FORTRAN_SENTINEL

namespace {

// True when `p` is one of the (present) manglings of a sentinel. An absent weak symbol has
// address null, which must not match a null argument.
bool IsSentinel(const void* p, const MPI_Fint* a, const MPI_Fint* b, const MPI_Fint* c, const MPI_Fint* d) {
  return p != nullptr && (p == a || p == b || p == c || p == d);
}

// A Fortran choice buffer as C sees it: MPI_IN_PLACE and MPI_BOTTOM become the C constants.
void* Buf(void* p) {
  if (IsSentinel(p, &MPI_FORTRAN_IN_PLACE, &mpi_fortran_in_place, &mpi_fortran_in_place_, &mpi_fortran_in_place__)) {
    return MPI_IN_PLACE;
  }
  if (IsSentinel(p, &MPI_FORTRAN_BOTTOM, &mpi_fortran_bottom, &mpi_fortran_bottom_, &mpi_fortran_bottom__)) {
    return MPI_BOTTOM;
  }
  return p;
}

bool IsStatusIgnore(const MPI_Fint* s) {
  return IsSentinel(s, &MPI_FORTRAN_STATUS_IGNORE, &mpi_fortran_status_ignore, &mpi_fortran_status_ignore_,
                    &mpi_fortran_status_ignore__);
}

bool IsStatusesIgnore(const MPI_Fint* s) {
  return IsSentinel(s, &MPI_FORTRAN_STATUSES_IGNORE, &mpi_fortran_statuses_ignore, &mpi_fortran_statuses_ignore_,
                    &mpi_fortran_statuses_ignore__);
}

const int* Ints(const MPI_Fint* a) { return reinterpret_cast<const int*>(a); }
int* Ints(MPI_Fint* a) { return reinterpret_cast<int*>(a); }

MPI_Comm Comm(const MPI_Fint* c) { return MPI_Comm_f2c(*c); }
MPI_Datatype Type(const MPI_Fint* t) { return MPI_Type_f2c(*t); }
MPI_Op Op(const MPI_Fint* o) { return MPI_Op_f2c(*o); }

// Fortran LOGICAL: any non-zero value is .true. (gfortran writes 1, some compilers -1); what we
// write back is 1, gfortran's and Open MPI's OMPI_FORTRAN_VALUE_TRUE for it.
int FromLogical(MPI_Fint l) { return l != 0 ? 1 : 0; }
MPI_Fint ToLogical(int b) { return b != 0 ? 1 : 0; }

void SetErr(MPI_Fint* ierr, int rc) {
  if (ierr != nullptr) {  // an mpi_f08 caller may leave its optional ierror out
    *ierr = rc;
  }
}

// One status: C storage unless the caller passed MPI_STATUS_IGNORE; written back after the call.
class OneStatus {
 public:
  explicit OneStatus(MPI_Fint* f) : f_(f), ignore_(f == nullptr || IsStatusIgnore(f)) {}
  MPI_Status* c() { return ignore_ ? MPI_STATUS_IGNORE : &c_; }
  void Return() {
    if (!ignore_) {
      MPI_Status_c2f(&c_, f_);
    }
  }

 private:
  MPI_Fint* f_;
  bool ignore_;
  MPI_Status c_{};
};

// `n` requests (and optionally statuses) as C arrays, converted back after the call. Small arrays
// stay on the stack: waitall over a handful of requests is the common case.
class Requests {
 public:
  Requests(int n, MPI_Fint* f, MPI_Fint* statuses) : n_(n < 0 ? 0 : n), f_(f), fs_(statuses) {
    if (n_ > kInline) {
      heap_.resize(n_);
      heap_status_.resize(n_);
    }
    for (int i = 0; i < n_; ++i) {
      reqs()[i] = MPI_Request_f2c(f_[i]);
    }
    ignore_ = statuses == nullptr || IsStatusesIgnore(statuses);
  }
  MPI_Request* reqs() { return n_ > kInline ? heap_.data() : inline_; }
  MPI_Status* statuses() { return ignore_ ? MPI_STATUSES_IGNORE : (n_ > kInline ? heap_status_.data() : status_); }
  // Requests back to Fortran handles (completed ones are MPI_REQUEST_NULL now), and the first
  // `count` statuses (all when negative).
  void Return(int count = -1) {
    for (int i = 0; i < n_; ++i) {
      f_[i] = MPI_Request_c2f(reqs()[i]);
    }
    if (ignore_) {
      return;
    }
    if (count < 0) {
      count = n_;
    }
    for (int i = 0; i < count; ++i) {
      MPI_Status_c2f(&statuses()[i], fs_ + static_cast<size_t>(i) * kStatusSize);
    }
  }

 private:
  static constexpr int kInline = 16;
  int n_;
  MPI_Fint* f_;
  MPI_Fint* fs_;
  bool ignore_ = true;
  MPI_Request inline_[kInline];
  MPI_Status status_[kInline]{};
  std::vector<MPI_Request> heap_;
  std::vector<MPI_Status> heap_status_;
};

}  // namespace

// Defines `FortranImpl_<lower>` with `params` (the body follows the macro) and its five names.
// The implementation is hidden (-fvisibility=hidden, and local in exports.map); the names are not.
#define COMMPROF_FORTRAN_ALIAS(lower, name, params) \
  extern "C" __attribute__((visibility("default"), alias("FortranImpl_" #lower))) void name params;
#define COMMPROF_FORTRAN(UPPER, lower, params)            \
  extern "C" void FortranImpl_##lower params;             \
  COMMPROF_FORTRAN_ALIAS(lower, UPPER, params)            \
  COMMPROF_FORTRAN_ALIAS(lower, mpi_##lower, params)      \
  COMMPROF_FORTRAN_ALIAS(lower, mpi_##lower##_, params)   \
  COMMPROF_FORTRAN_ALIAS(lower, mpi_##lower##__, params)  \
  COMMPROF_FORTRAN_ALIAS(lower, ompi_##lower##_f, params) \
  extern "C" void FortranImpl_##lower params
// The mpi_f08 name of an entry point whose f08 wrapper does not reach ompi_<lower>_f.
#define COMMPROF_FORTRAN_F08(lower, params) COMMPROF_FORTRAN_ALIAS(lower, mpi_##lower##_f08_, params)

using F = MPI_Fint;

// ---- lifetime: the C MPI_Init wrapper creates the runtime (argc/argv are optional in C) ----
COMMPROF_FORTRAN(MPI_INIT, init, (F * ierr)) { SetErr(ierr, MPI_Init(nullptr, nullptr)); }

COMMPROF_FORTRAN(MPI_INIT_THREAD, init_thread, (const F* required, F* provided, F* ierr)) {
  int p = 0;
  int rc = MPI_Init_thread(nullptr, nullptr, *required, &p);
  *provided = p;
  SetErr(ierr, rc);
}

COMMPROF_FORTRAN(MPI_FINALIZE, finalize, (F * ierr)) { SetErr(ierr, MPI_Finalize()); }

// ---- profiler control: MPI_PCONTROL(LEVEL) has no IERROR argument ----
COMMPROF_FORTRAN(MPI_PCONTROL, pcontrol, (const F* level)) { MPI_Pcontrol(*level); }

// ---- blocking collectives ----
COMMPROF_FORTRAN(MPI_BARRIER, barrier, (const F* comm, F* ierr)) { SetErr(ierr, MPI_Barrier(Comm(comm))); }

COMMPROF_FORTRAN(MPI_BCAST, bcast, (void* buf, const F* count, const F* dt, const F* root, const F* comm, F* ierr)) {
  SetErr(ierr, MPI_Bcast(Buf(buf), *count, Type(dt), *root, Comm(comm)));
}

COMMPROF_FORTRAN(MPI_REDUCE, reduce,
                 (void* s, void* r, const F* count, const F* dt, const F* op, const F* root, const F* comm, F* ierr)) {
  SetErr(ierr, MPI_Reduce(Buf(s), Buf(r), *count, Type(dt), Op(op), *root, Comm(comm)));
}

COMMPROF_FORTRAN(MPI_ALLREDUCE, allreduce,
                 (void* s, void* r, const F* count, const F* dt, const F* op, const F* comm, F* ierr)) {
  SetErr(ierr, MPI_Allreduce(Buf(s), Buf(r), *count, Type(dt), Op(op), Comm(comm)));
}

COMMPROF_FORTRAN(MPI_GATHER, gather,
                 (void* s, const F* sc, const F* sdt, void* r, const F* rc, const F* rdt, const F* root, const F* comm,
                  F* ierr)) {
  SetErr(ierr, MPI_Gather(Buf(s), *sc, Type(sdt), Buf(r), *rc, Type(rdt), *root, Comm(comm)));
}

COMMPROF_FORTRAN(MPI_GATHERV, gatherv,
                 (void* s, const F* sc, const F* sdt, void* r, const F* rcs, const F* displs, const F* rdt,
                  const F* root, const F* comm, F* ierr)) {
  SetErr(ierr, MPI_Gatherv(Buf(s), *sc, Type(sdt), Buf(r), Ints(rcs), Ints(displs), Type(rdt), *root, Comm(comm)));
}

COMMPROF_FORTRAN(MPI_SCATTER, scatter,
                 (void* s, const F* sc, const F* sdt, void* r, const F* rc, const F* rdt, const F* root, const F* comm,
                  F* ierr)) {
  SetErr(ierr, MPI_Scatter(Buf(s), *sc, Type(sdt), Buf(r), *rc, Type(rdt), *root, Comm(comm)));
}

COMMPROF_FORTRAN(MPI_SCATTERV, scatterv,
                 (void* s, const F* scs, const F* displs, const F* sdt, void* r, const F* rc, const F* rdt,
                  const F* root, const F* comm, F* ierr)) {
  SetErr(ierr, MPI_Scatterv(Buf(s), Ints(scs), Ints(displs), Type(sdt), Buf(r), *rc, Type(rdt), *root, Comm(comm)));
}

COMMPROF_FORTRAN(MPI_ALLGATHER, allgather,
                 (void* s, const F* sc, const F* sdt, void* r, const F* rc, const F* rdt, const F* comm, F* ierr)) {
  SetErr(ierr, MPI_Allgather(Buf(s), *sc, Type(sdt), Buf(r), *rc, Type(rdt), Comm(comm)));
}

COMMPROF_FORTRAN(MPI_ALLGATHERV, allgatherv,
                 (void* s, const F* sc, const F* sdt, void* r, const F* rcs, const F* displs, const F* rdt,
                  const F* comm, F* ierr)) {
  SetErr(ierr, MPI_Allgatherv(Buf(s), *sc, Type(sdt), Buf(r), Ints(rcs), Ints(displs), Type(rdt), Comm(comm)));
}

COMMPROF_FORTRAN(MPI_ALLTOALL, alltoall,
                 (void* s, const F* sc, const F* sdt, void* r, const F* rc, const F* rdt, const F* comm, F* ierr)) {
  SetErr(ierr, MPI_Alltoall(Buf(s), *sc, Type(sdt), Buf(r), *rc, Type(rdt), Comm(comm)));
}

COMMPROF_FORTRAN(MPI_ALLTOALLV, alltoallv,
                 (void* s, const F* scs, const F* sd, const F* sdt, void* r, const F* rcs, const F* rd, const F* rdt,
                  const F* comm, F* ierr)) {
  SetErr(ierr,
         MPI_Alltoallv(Buf(s), Ints(scs), Ints(sd), Type(sdt), Buf(r), Ints(rcs), Ints(rd), Type(rdt), Comm(comm)));
}

COMMPROF_FORTRAN(MPI_REDUCE_SCATTER, reduce_scatter,
                 (void* s, void* r, const F* rcs, const F* dt, const F* op, const F* comm, F* ierr)) {
  SetErr(ierr, MPI_Reduce_scatter(Buf(s), Buf(r), Ints(rcs), Type(dt), Op(op), Comm(comm)));
}

COMMPROF_FORTRAN(MPI_REDUCE_SCATTER_BLOCK, reduce_scatter_block,
                 (void* s, void* r, const F* rc, const F* dt, const F* op, const F* comm, F* ierr)) {
  SetErr(ierr, MPI_Reduce_scatter_block(Buf(s), Buf(r), *rc, Type(dt), Op(op), Comm(comm)));
}

COMMPROF_FORTRAN(MPI_SCAN, scan, (void* s, void* r, const F* count, const F* dt, const F* op, const F* comm, F* ierr)) {
  SetErr(ierr, MPI_Scan(Buf(s), Buf(r), *count, Type(dt), Op(op), Comm(comm)));
}

COMMPROF_FORTRAN(MPI_EXSCAN, exscan,
                 (void* s, void* r, const F* count, const F* dt, const F* op, const F* comm, F* ierr)) {
  SetErr(ierr, MPI_Exscan(Buf(s), Buf(r), *count, Type(dt), Op(op), Comm(comm)));
}

// ---- non-blocking collectives ----
COMMPROF_FORTRAN(MPI_IALLREDUCE, iallreduce,
                 (void* s, void* r, const F* count, const F* dt, const F* op, const F* comm, F* req, F* ierr)) {
  MPI_Request c = MPI_REQUEST_NULL;
  int rc = MPI_Iallreduce(Buf(s), Buf(r), *count, Type(dt), Op(op), Comm(comm), &c);
  *req = MPI_Request_c2f(c);
  SetErr(ierr, rc);
}

COMMPROF_FORTRAN(MPI_IBCAST, ibcast,
                 (void* buf, const F* count, const F* dt, const F* root, const F* comm, F* req, F* ierr)) {
  MPI_Request c = MPI_REQUEST_NULL;
  int rc = MPI_Ibcast(Buf(buf), *count, Type(dt), *root, Comm(comm), &c);
  *req = MPI_Request_c2f(c);
  SetErr(ierr, rc);
}

COMMPROF_FORTRAN(MPI_IBARRIER, ibarrier, (const F* comm, F* req, F* ierr)) {
  MPI_Request c = MPI_REQUEST_NULL;
  int rc = MPI_Ibarrier(Comm(comm), &c);
  *req = MPI_Request_c2f(c);
  SetErr(ierr, rc);
}

// ---- point to point ----
COMMPROF_FORTRAN(MPI_SEND, send,
                 (void* buf, const F* count, const F* dt, const F* dest, const F* tag, const F* comm, F* ierr)) {
  SetErr(ierr, MPI_Send(Buf(buf), *count, Type(dt), *dest, *tag, Comm(comm)));
}

COMMPROF_FORTRAN(MPI_SSEND, ssend,
                 (void* buf, const F* count, const F* dt, const F* dest, const F* tag, const F* comm, F* ierr)) {
  SetErr(ierr, MPI_Ssend(Buf(buf), *count, Type(dt), *dest, *tag, Comm(comm)));
}

COMMPROF_FORTRAN(MPI_RECV, recv,
                 (void* buf, const F* count, const F* dt, const F* src, const F* tag, const F* comm, F* status,
                  F* ierr)) {
  OneStatus st(status);
  int rc = MPI_Recv(Buf(buf), *count, Type(dt), *src, *tag, Comm(comm), st.c());
  st.Return();
  SetErr(ierr, rc);
}

COMMPROF_FORTRAN(MPI_SENDRECV, sendrecv,
                 (void* sbuf, const F* sc, const F* sdt, const F* dest, const F* stag, void* rbuf, const F* rc,
                  const F* rdt, const F* src, const F* rtag, const F* comm, F* status, F* ierr)) {
  OneStatus st(status);
  int ret =
      MPI_Sendrecv(Buf(sbuf), *sc, Type(sdt), *dest, *stag, Buf(rbuf), *rc, Type(rdt), *src, *rtag, Comm(comm), st.c());
  st.Return();
  SetErr(ierr, ret);
}

COMMPROF_FORTRAN(MPI_SENDRECV_REPLACE, sendrecv_replace,
                 (void* buf, const F* count, const F* dt, const F* dest, const F* stag, const F* src, const F* rtag,
                  const F* comm, F* status, F* ierr)) {
  OneStatus st(status);
  int rc = MPI_Sendrecv_replace(Buf(buf), *count, Type(dt), *dest, *stag, *src, *rtag, Comm(comm), st.c());
  st.Return();
  SetErr(ierr, rc);
}

COMMPROF_FORTRAN(MPI_ISEND, isend,
                 (void* buf, const F* count, const F* dt, const F* dest, const F* tag, const F* comm, F* req,
                  F* ierr)) {
  MPI_Request c = MPI_REQUEST_NULL;
  int rc = MPI_Isend(Buf(buf), *count, Type(dt), *dest, *tag, Comm(comm), &c);
  *req = MPI_Request_c2f(c);
  SetErr(ierr, rc);
}

COMMPROF_FORTRAN(MPI_IRECV, irecv,
                 (void* buf, const F* count, const F* dt, const F* src, const F* tag, const F* comm, F* req, F* ierr)) {
  MPI_Request c = MPI_REQUEST_NULL;
  int rc = MPI_Irecv(Buf(buf), *count, Type(dt), *src, *tag, Comm(comm), &c);
  *req = MPI_Request_c2f(c);
  SetErr(ierr, rc);
}

// ---- completion ----
COMMPROF_FORTRAN(MPI_WAIT, wait, (F * req, F* status, F* ierr)) {
  MPI_Request c = MPI_Request_f2c(*req);
  OneStatus st(status);
  int rc = MPI_Wait(&c, st.c());
  *req = MPI_Request_c2f(c);
  st.Return();
  SetErr(ierr, rc);
}

COMMPROF_FORTRAN(MPI_TEST, test, (F * req, F* flag, F* status, F* ierr)) {
  MPI_Request c = MPI_Request_f2c(*req);
  OneStatus st(status);
  int f = 0;
  int rc = MPI_Test(&c, &f, st.c());
  *req = MPI_Request_c2f(c);
  *flag = ToLogical(f);
  if (f != 0) {
    st.Return();
  }
  SetErr(ierr, rc);
}
COMMPROF_FORTRAN_F08(test, (F * req, F* flag, F* status, F* ierr))

COMMPROF_FORTRAN(MPI_WAITALL, waitall, (const F* count, F* reqs, F* statuses, F* ierr)) {
  Requests r(*count, reqs, statuses);
  int rc = MPI_Waitall(*count, r.reqs(), r.statuses());
  r.Return();
  SetErr(ierr, rc);
}

COMMPROF_FORTRAN(MPI_TESTALL, testall, (const F* count, F* reqs, F* flag, F* statuses, F* ierr)) {
  Requests r(*count, reqs, statuses);
  int f = 0;
  int rc = MPI_Testall(*count, r.reqs(), &f, r.statuses());
  *flag = ToLogical(f);
  r.Return(f != 0 ? -1 : 0);
  SetErr(ierr, rc);
}
COMMPROF_FORTRAN_F08(testall, (const F* count, F* reqs, F* flag, F* statuses, F* ierr))

// Indices are 1-based in Fortran; MPI_UNDEFINED has the same value in both languages.
COMMPROF_FORTRAN(MPI_WAITANY, waitany, (const F* count, F* reqs, F* index, F* status, F* ierr)) {
  Requests r(*count, reqs, nullptr);
  OneStatus st(status);
  int i = MPI_UNDEFINED;
  int rc = MPI_Waitany(*count, r.reqs(), &i, st.c());
  r.Return();
  st.Return();
  *index = i == MPI_UNDEFINED ? MPI_UNDEFINED : i + 1;
  SetErr(ierr, rc);
}

COMMPROF_FORTRAN(MPI_TESTANY, testany, (const F* count, F* reqs, F* index, F* flag, F* status, F* ierr)) {
  Requests r(*count, reqs, nullptr);
  OneStatus st(status);
  int i = MPI_UNDEFINED;
  int f = 0;
  int rc = MPI_Testany(*count, r.reqs(), &i, &f, st.c());
  r.Return();
  if (f != 0) {
    st.Return();
  }
  *flag = ToLogical(f);
  *index = i == MPI_UNDEFINED ? MPI_UNDEFINED : i + 1;
  SetErr(ierr, rc);
}
COMMPROF_FORTRAN_F08(testany, (const F* count, F* reqs, F* index, F* flag, F* status, F* ierr))

COMMPROF_FORTRAN(MPI_WAITSOME, waitsome, (const F* count, F* reqs, F* outcount, F* indices, F* statuses, F* ierr)) {
  Requests r(*count, reqs, statuses);
  int n = 0;
  int rc = MPI_Waitsome(*count, r.reqs(), &n, Ints(indices), r.statuses());
  // C fills statuses[0..n) in completion order, one per index; Fortran's are in the same order.
  r.Return(n == MPI_UNDEFINED ? 0 : n);
  *outcount = n;
  for (int k = 0; n != MPI_UNDEFINED && k < n; ++k) {
    indices[k] += 1;
  }
  SetErr(ierr, rc);
}

COMMPROF_FORTRAN(MPI_TESTSOME, testsome, (const F* count, F* reqs, F* outcount, F* indices, F* statuses, F* ierr)) {
  Requests r(*count, reqs, statuses);
  int n = 0;
  int rc = MPI_Testsome(*count, r.reqs(), &n, Ints(indices), r.statuses());
  r.Return(n == MPI_UNDEFINED ? 0 : n);
  *outcount = n;
  for (int k = 0; n != MPI_UNDEFINED && k < n; ++k) {
    indices[k] += 1;
  }
  SetErr(ierr, rc);
}
COMMPROF_FORTRAN_F08(testsome, (const F* count, F* reqs, F* outcount, F* indices, F* statuses, F* ierr))

// ---- communicator creation ----
COMMPROF_FORTRAN(MPI_COMM_DUP, comm_dup, (const F* comm, F* newcomm, F* ierr)) {
  MPI_Comm c = MPI_COMM_NULL;
  int rc = MPI_Comm_dup(Comm(comm), &c);
  *newcomm = MPI_Comm_c2f(c);
  SetErr(ierr, rc);
}

COMMPROF_FORTRAN(MPI_COMM_SPLIT, comm_split, (const F* comm, const F* color, const F* key, F* newcomm, F* ierr)) {
  MPI_Comm c = MPI_COMM_NULL;
  int rc = MPI_Comm_split(Comm(comm), *color, *key, &c);
  *newcomm = MPI_Comm_c2f(c);
  SetErr(ierr, rc);
}

COMMPROF_FORTRAN(MPI_COMM_CREATE, comm_create, (const F* comm, const F* group, F* newcomm, F* ierr)) {
  MPI_Comm c = MPI_COMM_NULL;
  int rc = MPI_Comm_create(Comm(comm), MPI_Group_f2c(*group), &c);
  *newcomm = MPI_Comm_c2f(c);
  SetErr(ierr, rc);
}

COMMPROF_FORTRAN(MPI_CART_CREATE, cart_create,
                 (const F* comm, const F* ndims, const F* dims, const F* periods, const F* reorder, F* newcomm,
                  F* ierr)) {
  std::vector<int> p(*ndims > 0 ? *ndims : 0);
  for (size_t i = 0; i < p.size(); ++i) {
    p[i] = FromLogical(periods[i]);
  }
  MPI_Comm c = MPI_COMM_NULL;
  int rc = MPI_Cart_create(Comm(comm), *ndims, Ints(dims), p.data(), FromLogical(*reorder), &c);
  *newcomm = MPI_Comm_c2f(c);
  SetErr(ierr, rc);
}
COMMPROF_FORTRAN_F08(cart_create, (const F* comm, const F* ndims, const F* dims, const F* periods, const F* reorder,
                                   F* newcomm, F* ierr))
