# Warnings and sanitizers, applied through INTERFACE targets that every spmdsim target links.

add_library(spmdsim_warnings INTERFACE)
add_library(spmdsim::warnings ALIAS spmdsim_warnings)
target_compile_options(spmdsim_warnings INTERFACE
  -Wall -Wextra -Wpedantic $<$<CXX_COMPILER_ID:GNU>:-Wshadow=local> -Wnon-virtual-dtor -Wno-unused-parameter
  $<$<BOOL:${SPMDSIM_WERROR}>:-Werror>)
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  # Checks the lock contracts written with common/thread_annotations.h (the `clang` preset).
  target_compile_options(spmdsim_warnings INTERFACE -Wthread-safety)
endif()
if(SPMDSIM_SANITIZE AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  # GCC 12 reports false -Wmaybe-uninitialized inside libstdc++ (<regex>, std::function) once the sanitizers
  # change inlining; the warning stays on in the dev and release builds.
  target_compile_options(spmdsim_warnings INTERFACE -Wno-maybe-uninitialized)
endif()

add_library(spmdsim_sanitize INTERFACE)
if(SPMDSIM_SANITIZE)
  list(JOIN SPMDSIM_SANITIZE "," _spmdsim_san)
  target_compile_options(spmdsim_sanitize INTERFACE
    -fsanitize=${_spmdsim_san} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  target_link_options(spmdsim_sanitize INTERFACE -fsanitize=${_spmdsim_san})
  if("thread" IN_LIST SPMDSIM_SANITIZE)
    # Boost.Context switches stacks under ThreadSanitizer's feet unless told; see docs/runtime.md.
    target_compile_definitions(spmdsim_sanitize INTERFACE SPMDSIM_TSAN=1)
  endif()
  if("address" IN_LIST SPMDSIM_SANITIZE)
    target_compile_definitions(spmdsim_sanitize INTERFACE SPMDSIM_ASAN=1)
  endif()
endif()

# spmdsim_library(NAME SOURCES... [DEPS ...] [PRIVATE_DEPS ...])
# Defines spmdsim_<NAME> with alias spmdsim::<NAME>, C++20, warnings and sanitizers.
function(spmdsim_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(spmdsim_${name} ${ARG_SOURCES})
  add_library(spmdsim::${name} ALIAS spmdsim_${name})
  set_target_properties(spmdsim_${name} PROPERTIES EXPORT_NAME ${name}
                        POSITION_INDEPENDENT_CODE ON)
  target_compile_features(spmdsim_${name} PUBLIC cxx_std_20)
  target_include_directories(spmdsim_${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
    $<INSTALL_INTERFACE:include/spmdsim>)
  target_link_libraries(spmdsim_${name} PUBLIC ${ARG_DEPS}
    PRIVATE ${ARG_PRIVATE_DEPS} $<BUILD_INTERFACE:spmdsim_warnings>)
  target_link_libraries(spmdsim_${name} PUBLIC $<BUILD_INTERFACE:spmdsim_sanitize>)
  set_property(GLOBAL APPEND PROPERTY SPMDSIM_LIBRARIES spmdsim_${name})
endfunction()
