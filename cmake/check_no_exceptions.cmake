# Compiles and links SRC with -fno-exceptions -fno-rtti (FLAGS: includes, arch), then fails if the
# image references exception machinery, RTTI or the heap.
separate_arguments(flags UNIX_COMMAND "${FLAGS}")
execute_process(COMMAND "${CXX}" -std=c++20 -O2 -fno-exceptions -fno-rtti ${flags} "${SRC}" -o "${OUT}"
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${SRC} does not build with -fno-exceptions -fno-rtti:\n${err}")
endif()
execute_process(COMMAND "${NM}" -C "${OUT}" RESULT_VARIABLE rc OUTPUT_VARIABLE syms)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm failed on ${OUT}")
endif()
set(forbidden "__cxa_throw|__cxa_allocate_exception|std::__throw_|typeinfo for|malloc|operator new")
# One scan for the names; the offending lines only on failure (a regex with a leading [^\n]* over
# clang's 1.4 MB of demangled symbols took 3 minutes).
if(syms MATCHES "${forbidden}")
  string(REGEX MATCHALL "[^\n]*(${forbidden})[^\n]*" bad "${syms}")
  string(REPLACE ";" "\n" bad "${bad}")
  message(FATAL_ERROR "the image references exceptions, RTTI or the heap:\n${bad}")
endif()
message(STATUS "no exceptions, RTTI or heap in ${OUT}")
