# Builds bench/ with the tfslurm tree while the top-level CMakeLists.txt has no
# add_subdirectory(bench) yet, without touching it:
#   cmake -S /work/main -B /tmp/bench-build -G Ninja \
#         -DCMAKE_PROJECT_INCLUDE=/work/main/bench/standalone.cmake
# CMake includes this file right after project(); the deferred call reads
# bench/CMakeLists.txt once the top-level file has defined every target
# (unless add_subdirectory(bench) already did). A deferred call may not add a
# subdirectory, so the file is include()d; its paths use CMAKE_CURRENT_LIST_DIR.
function(tfslurm_bench_add_once)
  if(NOT TARGET bench_rendezvous_server)
    include(${TFSLURM_BENCH_DIR}/CMakeLists.txt)
  endif()
endfunction()
set(TFSLURM_BENCH_DIR ${CMAKE_CURRENT_LIST_DIR})
cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL tfslurm_bench_add_once)
