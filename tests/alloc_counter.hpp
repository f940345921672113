// Counts every heap allocation of the test binary: global operator new (all forms) and the C
// allocator (glibc's malloc/calloc/realloc are replaced and forwarded to __libc_*).
#pragma once
// A sanitizer replaces malloc and operator new itself: under one, nothing is replaced here and
// each binary that includes this only reports that it is skipped (the plain builds run it).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CT_ALLOC_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define CT_ALLOC_SANITIZED 1
#endif
#endif

#ifdef CT_ALLOC_SANITIZED
#include <doctest/doctest.h>
TEST_CASE("no heap allocation (skipped: a sanitizer owns malloc in this build)") {
    MESSAGE("allocation counting skipped under a sanitizer: it replaces malloc/operator new itself; "
            "the g++, clang and aarch64 builds run it");
}
#else
#include <cstddef>
#include <cstdlib>
#include <new>

namespace alloc_counter {
inline std::size_t count = 0;
inline bool armed = false;
inline void note() {
    if (armed) ++count;
}
// Counts allocations made while f runs.
template <class F> std::size_t during(F&& f) {
    count = 0;
    armed = true;
    f();
    armed = false;
    return count;
}
}  // namespace alloc_counter

extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* malloc(std::size_t n) {
    alloc_counter::note();
    return __libc_malloc(n);
}
void* calloc(std::size_t n, std::size_t s) {
    alloc_counter::note();
    return __libc_calloc(n, s);
}
void* realloc(void* p, std::size_t n) {
    alloc_counter::note();
    return __libc_realloc(p, n);
}
}

void* operator new(std::size_t n) {
    alloc_counter::note();
    if (void* p = __libc_malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, std::align_val_t a) {
    alloc_counter::note();
    void* p = nullptr;
    if (posix_memalign(&p, static_cast<std::size_t>(a), n ? n : 1) != 0) throw std::bad_alloc();
    return p;
}
void* operator new[](std::size_t n, std::align_val_t a) { return operator new(n, a); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
#endif  // CT_ALLOC_SANITIZED
