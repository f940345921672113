// ARM semihosting (the debugger's, here qemu's, console and exit) without a C library's stdio: no
// heap, no FILE buffers. Numbers are formatted by hand.
#pragma once
#include <cstddef>
#include <cstdint>

namespace semihosting {

inline int call(int op, const void* arg) {
    register int r0 __asm__("r0") = op;
    register const void* r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}
inline void write(const char* s) { call(0x04, s); }  // SYS_WRITE0
[[noreturn]] inline void exit(bool ok) {             // SYS_EXIT: qemu exits 0 on ApplicationExit
    call(0x18, reinterpret_cast<const void*>(ok ? 0x20026 : 0x20023));
    for (;;) {}
}

// "123", and "1.23e-06" (3 significant digits) into a small buffer.
struct text {
    char buf[32];
    std::size_t n = 0;
    text& put(char c) { if (n + 1 < sizeof buf) buf[n++] = c; buf[n] = 0; return *this; }
    text& put(const char* s) {
        while (*s) put(*s++);
        return *this;
    }
    text& put(std::size_t v) {
        char d[20];
        std::size_t k = 0;
        do d[k++] = char('0' + v % 10); while ((v /= 10) != 0);
        while (k) put(d[--k]);
        return *this;
    }
    text& sci(double v) {
        if (v < 0) put('-'), v = -v;
        if (v == 0) return put('0');
        int e = 0;
        while (v >= 10) v /= 10, ++e;
        while (v < 1) v *= 10, --e;
        const auto m = static_cast<std::size_t>(v * 100 + 0.5);
        put(char('0' + m / 100)).put('.').put(char('0' + m / 10 % 10)).put(char('0' + m % 10)).put('e');
        if (e < 0) put('-'), e = -e;
        if (e < 10) put('0');
        return put(static_cast<std::size_t>(e));
    }
};
inline void write(const text& t) { write(t.buf); }

}  // namespace semihosting
