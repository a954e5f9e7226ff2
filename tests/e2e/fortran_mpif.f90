! The mpif.h binding under `commprof run` (tests/e2e/fortran_capture.py, case mpif). Four ranks:
! 50 allreduces on MPI_COMM_WORLD (every other one MPI_IN_PLACE) with rank 3 planted 5 ms late
! before each, 3 bcasts of 16 INTEGERs from root 1, an allreduce and a barrier on the
! communicator of MPI_Comm_split(color = rank mod 2), an MPI_Sendrecv ring (10 INTEGERs, tag 7,
! to rank+1), an Isend/Irecv ring (tag 8, to rank-1) completed by MPI_Waitall with statuses, and
! an MPI_Iallreduce polled with MPI_Test. Every result and status is checked: a wrong one aborts
! with exit code 3. fortran_use_mpi.f90 and fortran_f08.f90 do the same through the modules.
program fortran_mpif
  use, intrinsic :: iso_c_binding, only: c_int
  implicit none
  include 'mpif.h'
  interface
    ! The planted lateness is a sleep, not a spin: 4 ranks share 2 cores.
    function usleep(us) bind(C, name='usleep') result(rc)
      import :: c_int
      integer(c_int), value :: us
      integer(c_int) :: rc
    end function usleep
  end interface
  integer, parameter :: iters = 50, late_rank = 3, late_us = 5000
  integer :: ierr, rank, nranks, i, sub, left, right, req, subsum
  integer :: x(8), y(8), b(16), s(10), r(10), q(10), reqs(2), st(MPI_STATUS_SIZE, 2), one(MPI_STATUS_SIZE)
  logical :: flag

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  if (nranks /= 4) call fail('needs 4 ranks')

  do i = 1, iters
    if (rank == late_rank) ierr = usleep(late_us)
    x = rank + i
    if (mod(i, 2) == 0) then
      call MPI_Allreduce(MPI_IN_PLACE, x, 8, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
      y = x
    else
      call MPI_Allreduce(x, y, 8, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    end if
    if (any(y /= 6 + 4 * i)) call fail('allreduce result')
  end do

  do i = 1, 3
    b = rank
    call MPI_Bcast(b, 16, MPI_INTEGER, 1, MPI_COMM_WORLD, ierr)
    if (any(b /= 1)) call fail('bcast result')
  end do

  call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), rank, sub, ierr)
  call MPI_Allreduce(rank, subsum, 1, MPI_INTEGER, MPI_SUM, sub, ierr)
  if (subsum /= 2 + 2 * mod(rank, 2)) call fail('split allreduce result')
  call MPI_Barrier(sub, ierr)

  right = mod(rank + 1, 4)
  left = mod(rank + 3, 4)
  s = rank
  call MPI_Sendrecv(s, 10, MPI_INTEGER, right, 7, r, 10, MPI_INTEGER, left, 7, MPI_COMM_WORLD, one, ierr)
  if (any(r /= left) .or. one(MPI_SOURCE) /= left .or. one(MPI_TAG) /= 7) call fail('sendrecv')

  call MPI_Irecv(q, 10, MPI_INTEGER, right, 8, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_Isend(s, 10, MPI_INTEGER, left, 8, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Waitall(2, reqs, st, ierr)
  if (any(q /= right) .or. st(MPI_SOURCE, 2) /= right .or. any(reqs /= MPI_REQUEST_NULL)) call fail('waitall')

  x = 1
  call MPI_Iallreduce(x, y, 8, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, req, ierr)
  flag = .false.
  do while (.not. flag)
    call MPI_Test(req, flag, MPI_STATUS_IGNORE, ierr)
  end do
  if (any(y /= 4) .or. req /= MPI_REQUEST_NULL) call fail('iallreduce/test')

  call MPI_Comm_free(sub, ierr)
  call MPI_Finalize(ierr)

contains

  subroutine fail(what)
    character(*), intent(in) :: what
    integer :: e
    print '(a, i0, 2a)', 'fortran_mpif: rank ', rank, ': wrong ', what
    call MPI_Abort(MPI_COMM_WORLD, 3, e)
  end subroutine fail

end program fortran_mpif
