// ctformer/io/flash.hpp — Params that live in flash (or any read-only memory), read in place.
//
// A Params object is plain storage (arrays in the kernels' panel layout), so an image of its bytes,
// made on the build machine by the converter (tools/flash_image.hpp), *is* the object: the image
// is placed in a read-only section by the assembler (.incbin: the compiler never parses the
// weights, so a 17 MB base-shape image compiles as fast as a 1 KB one) and named by a symbol that
// C++ declares as `extern const Params`. No copy into RAM; every entry point takes `const Params&`.
//
// The generated header calls CTFORMER_FLASH_PARAMS, which checks that the image matches this
// build's layout (byte size, register-tile width of float and double, endianness): an image made
// for another vector ISA is a compile error, not wrong numbers.
#pragma once
#include <bit>
#include <cstddef>

#include "../core/panels.hpp"

// Defines symbol `sym` (C linkage) as the bytes of `file`, 64-byte aligned in a read-only section
// (.rodata.<sym>, a COMDAT group: including the header from several translation units is fine),
// and declares it as `const Params`.
#define CTFORMER_FLASH_PARAMS(sym, Params, file, bytes, nr_float, nr_double)                                    \
    static_assert(sizeof(Params) == (bytes), "ctformer: flash image " #sym " was made for another Params type " \
                                             "or build (its byte size differs)");                               \
    static_assert(::ctformer::kernels::gemm_tile<float>::NR == (nr_float) &&                                    \
                      ::ctformer::kernels::gemm_tile<double>::NR == (nr_double),                                \
                  "ctformer: flash image " #sym " has another vector ISA's panel layout: convert it with the "  \
                  "target's flags (e.g. -DCTFORMER_SCALAR for a Cortex-M)");                                    \
    static_assert(std::endian::native == std::endian::little, "ctformer: flash images are little-endian");      \
    __asm__(".pushsection .rodata." #sym ",\"aG\",%progbits," #sym ",comdat\n"                                 \
            ".balign 64\n"                                                                                      \
            ".global " #sym "\n"                                                                                \
            ".type " #sym ", %object\n"                                                                         \
            #sym ":\n"                                                                                          \
            ".incbin \"" file "\"\n"                                                                            \
            ".size " #sym ", . - " #sym "\n"                                                                    \
            ".popsection\n");                                                                                   \
    extern "C" const Params sym
