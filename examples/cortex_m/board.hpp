// What the text firmware needs from a board: console output, exit, an instruction clock and the
// stack's high-water mark. On an M-profile core: semihosting, SysTick (qemu -icount: virtual time
// is instructions), stack painting. Built for the host (the determinism check's reference): stdio.
#pragma once
#include <cstddef>
#include <cstdint>

#if defined(__arm__)
#include "semihosting.hpp"

namespace board {
using semihosting::write;
[[noreturn]] inline void exit(bool ok) { semihosting::exit(ok); }

// SysTick as a free-running 24-bit down-counter on the core clock.
inline volatile std::uint32_t& syst(std::uintptr_t a) { return *reinterpret_cast<volatile std::uint32_t*>(a); }
inline void clock_start() {
    syst(0xE000E014) = 0xFFFFFF;  // reload
    syst(0xE000E018) = 0;         // current
    syst(0xE000E010) = 5;         // enable, processor clock, no interrupt
}
inline std::uint32_t clock_now() { return syst(0xE000E018); }
inline std::uint32_t clock_since(std::uint32_t then) { return (then - clock_now()) & 0xFFFFFF; }  // (< 2^24 ticks)
// Instructions per SysTick tick under qemu's -icount (one instruction per 2^shift ns): timed on a
// loop of 2·n instructions. 0 where time is not instructions (no -icount, real hardware).
inline std::uint32_t instructions_per_tick() {
    std::uint32_t n = 200000;
    const std::uint32_t t0 = clock_now();
    __asm__ volatile("1: subs %0, %0, #1\n bne 1b" : "+r"(n) : : "cc");
    const std::uint32_t ticks = clock_since(t0);
    return ticks ? (400000 + ticks / 2) / ticks : 0;
}

// The stack between the end of RAM's static data and the current stack pointer is painted; the
// deepest word no longer holding the paint is the high-water mark.
extern "C" std::uint32_t __stack_limit[], __stack_top[];
inline constexpr std::uint32_t paint = 0x57AC57ACu;
__attribute__((noinline)) inline void stack_paint() {
    std::uint32_t* sp;
    __asm__ volatile("mov %0, sp" : "=r"(sp));
    for (std::uint32_t* p = __stack_limit; p < sp - 16; ++p) *p = paint;
}
inline std::size_t stack_used() {  // bytes below the top of the stack ever written
    const std::uint32_t* p = __stack_limit;
    while (p < __stack_top && *p == paint) ++p;
    return static_cast<std::size_t>(__stack_top - p) * 4;
}
}  // namespace board
#else
#include <cstdio>
#include <cstdlib>

namespace board {
inline void write(const char* s) { std::fputs(s, stdout); }
[[noreturn]] inline void exit(bool ok) { std::exit(ok ? 0 : 1); }
inline void clock_start() {}
inline std::uint32_t clock_now() { return 0; }
inline std::uint32_t clock_since(std::uint32_t) { return 0; }
inline std::uint32_t instructions_per_tick() { return 0; }
inline void stack_paint() {}
inline std::size_t stack_used() { return 0; }
}  // namespace board
#endif
