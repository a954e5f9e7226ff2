# Fails unless libcommprof.so's dynamic symbol table holds only the MPI_* wrappers (and their Fortran
# names mpi_*, ompi_*_f), the commprof_* C API and internal entry points, and the CUDA/NVTX injection entry points (InitializeInjection*),
# plus what the toolchain always adds; InitializeInjection must be there (the CUDA driver looks it
# up when CUDA_INJECTION64_PATH names the library), and libcupti must not be a NEEDED entry (it is
# dlopen'ed so the library loads where CUDA is absent). Usage: cmake -DLIB=<path> -P <this file>
cmake_policy(SET CMP0057 NEW)
execute_process(COMMAND nm -D --defined-only ${LIB} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm -D --defined-only ${LIB} failed (${rc})")
endif()
string(REPLACE "\n" ";" lines "${out}")
set(found "")
foreach(line IN LISTS lines)
  if(line MATCHES "^[0-9a-fA-F]* *[A-Za-z] ([^ ]+)$")
    string(REGEX REPLACE "@.*" "" sym "${CMAKE_MATCH_1}")
    # mpi_* and ompi_*_f: the Fortran bindings (collector/mpi_fortran.cc, docs/mpi-bindings.md).
    if(NOT sym MATCHES "^(MPI_|mpi_|commprof_|InitializeInjection)" AND NOT sym MATCHES "^ompi_[a-z_]+_f$"
       AND NOT sym MATCHES "^(_init|_fini|_edata|_end|__bss_start)$")
      message(FATAL_ERROR "${LIB} exports ${sym}: only MPI_*, mpi_*, ompi_*_f, commprof_* and InitializeInjection* may leave the library")
    endif()
    list(APPEND found ${sym})
  endif()
endforeach()
foreach(need InitializeInjection MPI_Init mpi_allreduce_ ompi_allreduce_f mpi_test_f08_ commprof_step commprof_internal_record)
  if(NOT need IN_LIST found)
    message(FATAL_ERROR "${LIB} does not export ${need}")
  endif()
endforeach()
execute_process(COMMAND readelf -d ${LIB} OUTPUT_VARIABLE dyn RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "readelf -d ${LIB} failed (${rc})")
endif()
if(dyn MATCHES "NEEDED[^\n]*libcu")
  message(FATAL_ERROR "${LIB} has a NEEDED entry on a CUDA library; CUPTI must be dlopen'ed:\n${dyn}")
endif()
list(LENGTH found n)
message(STATUS "${n} exported symbols, InitializeInjection among them; no NEEDED CUDA library")
