! The `use mpi_f08` binding under `commprof run` (tests/e2e/fortran_capture.py, case f08): the
! program of fortran_mpif.f90 (see there what each rank does and what is checked) with the f08
! handle types, MPI_Status components and ierror left out of most calls (it is optional there).
program fortran_f08
  use, intrinsic :: iso_c_binding, only: c_int
  use mpi_f08
  implicit none
  interface
    ! The planted lateness is a sleep, not a spin: 4 ranks share 2 cores.
    function usleep(us) bind(C, name='usleep') result(rc)
      import :: c_int
      integer(c_int), value :: us
      integer(c_int) :: rc
    end function usleep
  end interface
  integer, parameter :: iters = 50, late_rank = 3, late_us = 5000
  integer :: ierr, rank, nranks, i, left, right, subsum
  integer :: x(8), y(8), b(16), s(10), r(10), q(10)
  type(MPI_Comm) :: sub
  type(MPI_Request) :: reqs(2), req
  type(MPI_Status) :: st(2), one
  logical :: flag

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks)
  if (nranks /= 4) call fail('needs 4 ranks')

  do i = 1, iters
    if (rank == late_rank) ierr = usleep(late_us)
    x = rank + i
    if (mod(i, 2) == 0) then
      call MPI_Allreduce(MPI_IN_PLACE, x, 8, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
      y = x
    else
      call MPI_Allreduce(x, y, 8, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    end if
    if (any(y /= 6 + 4 * i)) call fail('allreduce result')
  end do

  do i = 1, 3
    b = rank
    call MPI_Bcast(b, 16, MPI_INTEGER, 1, MPI_COMM_WORLD)
    if (any(b /= 1)) call fail('bcast result')
  end do

  call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), rank, sub)
  call MPI_Allreduce(rank, subsum, 1, MPI_INTEGER, MPI_SUM, sub)
  if (subsum /= 2 + 2 * mod(rank, 2)) call fail('split allreduce result')
  call MPI_Barrier(sub)

  right = mod(rank + 1, 4)
  left = mod(rank + 3, 4)
  s = rank
  call MPI_Sendrecv(s, 10, MPI_INTEGER, right, 7, r, 10, MPI_INTEGER, left, 7, MPI_COMM_WORLD, one)
  if (any(r /= left) .or. one%MPI_SOURCE /= left .or. one%MPI_TAG /= 7) call fail('sendrecv')

  call MPI_Irecv(q, 10, MPI_INTEGER, right, 8, MPI_COMM_WORLD, reqs(2))
  call MPI_Isend(s, 10, MPI_INTEGER, left, 8, MPI_COMM_WORLD, reqs(1))
  call MPI_Waitall(2, reqs, st)
  if (any(q /= right) .or. st(2)%MPI_SOURCE /= right) call fail('waitall')
  if (reqs(1) /= MPI_REQUEST_NULL .or. reqs(2) /= MPI_REQUEST_NULL) call fail('waitall requests')

  x = 1
  call MPI_Iallreduce(x, y, 8, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, req)
  flag = .false.
  do while (.not. flag)
    call MPI_Test(req, flag, MPI_STATUS_IGNORE)
  end do
  if (any(y /= 4) .or. req /= MPI_REQUEST_NULL) call fail('iallreduce/test')

  call MPI_Comm_free(sub)
  call MPI_Finalize()

contains

  subroutine fail(what)
    character(*), intent(in) :: what
    print '(a, i0, 2a)', 'fortran_f08: rank ', rank, ': wrong ', what
    call MPI_Abort(MPI_COMM_WORLD, 3)
  end subroutine fail

end program fortran_f08
