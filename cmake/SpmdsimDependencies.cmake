# Every dependency is a Debian package (scripts/install-deps.sh installs them); nothing is downloaded here.
find_package(Threads REQUIRED)
find_package(TBB REQUIRED)
find_package(Boost 1.74 REQUIRED COMPONENTS context regex)
find_package(Eigen3 3.4 REQUIRED NO_MODULE)
find_package(fmt REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(CLI11 REQUIRED)
# MPI (Open MPI: libopenmpi-dev, openmpi-bin) for several processes (docs/multiprocess.md): on when found.
# Only the C API is used (no C++ bindings); only sim/internal/mpi_transport.cc includes mpi.h.
set(MPI_CXX_SKIP_MPICXX ON)
find_package(MPI COMPONENTS CXX QUIET)
option(SPMDSIM_WITH_MPI "Run one simulation over several processes with MPI (sim/multiprocess.h)" ${MPI_CXX_FOUND})
if(SPMDSIM_WITH_MPI AND NOT MPI_CXX_FOUND)
  message(FATAL_ERROR "SPMDSIM_WITH_MPI is ON but no MPI was found (Debian: libopenmpi-dev openmpi-bin)")
endif()
message(STATUS "spmdsim: SPMDSIM_WITH_MPI=${SPMDSIM_WITH_MPI}")
# How the tests launch local ranks: as root too (CI containers), more ranks than cores, no pinning (each rank
# runs several worker threads).
if(SPMDSIM_WITH_MPI)
  set(SPMDSIM_MPIRUN ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe --bind-to none)
  # Open MPI keeps allocations past MPI_Finalize (its dlopen'ed components, hwloc), which LeakSanitizer
  # reports as ~3,400 leaks with no spmdsim frame: the ranks run without leak detection (the same code is
  # leak-checked by the one-process tests); every other AddressSanitizer check stays on.
  if("address" IN_LIST SPMDSIM_SANITIZE)
    list(APPEND SPMDSIM_MPIRUN -x ASAN_OPTIONS=detect_leaks=0:abort_on_error=1)
  endif()
endif()
if(SPMDSIM_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(SPMDSIM_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)
endif()
