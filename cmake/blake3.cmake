# BLAKE3: a system libblake3 when one is installed, otherwise the official C implementation (x86-64 assembly,
# runtime CPU dispatch) compiled from the sources Debian ships in librust-blake3-dev.
find_library(SYSTEM_BLAKE3 NAMES blake3)
find_path(SYSTEM_BLAKE3_INCLUDE blake3.h)
if(SYSTEM_BLAKE3 AND SYSTEM_BLAKE3_INCLUDE)
  add_library(blake3 INTERFACE)
  target_link_libraries(blake3 INTERFACE ${SYSTEM_BLAKE3})
  target_include_directories(blake3 INTERFACE ${SYSTEM_BLAKE3_INCLUDE})
  message(STATUS "BLAKE3: system library ${SYSTEM_BLAKE3}")
  return()
endif()

file(GLOB BLAKE3_C_DIRS LIST_DIRECTORIES true /usr/share/cargo/registry/blake3-*/c)
list(SORT BLAKE3_C_DIRS COMPARE NATURAL ORDER DESCENDING)
list(GET BLAKE3_C_DIRS 0 BLAKE3_DIR)
if(NOT EXISTS "${BLAKE3_DIR}/blake3.c")
  message(FATAL_ERROR "BLAKE3 sources not found: run scripts/bootstrap.sh (package librust-blake3-dev)")
endif()
message(STATUS "BLAKE3: compiling ${BLAKE3_DIR}")

set(BLAKE3_SOURCES ${BLAKE3_DIR}/blake3.c ${BLAKE3_DIR}/blake3_dispatch.c ${BLAKE3_DIR}/blake3_portable.c)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  list(APPEND BLAKE3_SOURCES
       ${BLAKE3_DIR}/blake3_sse2_x86-64_unix.S ${BLAKE3_DIR}/blake3_sse41_x86-64_unix.S
       ${BLAKE3_DIR}/blake3_avx2_x86-64_unix.S ${BLAKE3_DIR}/blake3_avx512_x86-64_unix.S)
  set(BLAKE3_DEFS)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
  list(APPEND BLAKE3_SOURCES ${BLAKE3_DIR}/blake3_neon.c)
  set(BLAKE3_DEFS BLAKE3_USE_NEON=1)
else()
  set(BLAKE3_DEFS BLAKE3_NO_SSE2 BLAKE3_NO_SSE41 BLAKE3_NO_AVX2 BLAKE3_NO_AVX512)
endif()
add_library(blake3 STATIC ${BLAKE3_SOURCES})
target_include_directories(blake3 SYSTEM PUBLIC ${BLAKE3_DIR})
target_compile_definitions(blake3 PRIVATE ${BLAKE3_DEFS})
set_target_properties(blake3 PROPERTIES POSITION_INDEPENDENT_CODE ON C_STANDARD 99)
# Third-party code: never subject to our warning flags or sanitizers' noise about asm.
target_compile_options(blake3 PRIVATE -O3 -w)
