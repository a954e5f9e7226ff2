! MPI_Pcontrol from Fortran (capture_windows.py, cases fortran_use_mpi and fortran_f08): 6 steps,
! each begun by MPI_Pcontrol(2), with 3 recorded MPI_Allreduce and 2 more between MPI_Pcontrol(0)
! and MPI_Pcontrol(1). Built once with `use mpi` and once with `use mpi_f08` (-DUSE_F08).
program fortran_pcontrol
#ifdef USE_F08
  use mpi_f08
#else
  use mpi
#endif
  implicit none
  integer :: ierr, s, c, x, y
  call MPI_Init(ierr)
  x = 1
  do s = 0, 5
    call MPI_Pcontrol(2)
    do c = 1, 3
      call MPI_Allreduce(x, y, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    end do
    call MPI_Pcontrol(0)
    do c = 1, 2
      call MPI_Allreduce(x, y, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    end do
    call MPI_Pcontrol(1)
  end do
  call MPI_Finalize(ierr)
end program fortran_pcontrol
