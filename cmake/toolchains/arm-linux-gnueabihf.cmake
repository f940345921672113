# 32-bit ARM Linux with NEON (float vectors; double kernels run scalar), Debian's
# g++-arm-linux-gnueabihf; tests run under qemu-user:
#   cmake -S . -B build-armv7 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/arm-linux-gnueabihf.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR armv7)
set(CMAKE_CXX_COMPILER arm-linux-gnueabihf-g++)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-arm -L /usr/arm-linux-gnueabihf)
set(CMAKE_FIND_ROOT_PATH /usr/arm-linux-gnueabihf)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CTFORMER_NATIVE OFF CACHE BOOL "")
# (-Wno-psabi: GCC notes that std::vector parameter passing changed in GCC 7.1, in doctest)
set(CTFORMER_ARCH_FLAGS "-march=armv7-a -mfpu=neon -mfloat-abi=hard -Wno-psabi" CACHE STRING "")
