// ctformer/core/huge_pages.hpp — asking the OS to back the big roles with 2 MB pages.
//
// ctformer never allocates: params, workspaces, activations and caches live where the user puts
// them. A layer's forward touches all of them once per call (more 4 KB pages than a second-level
// TLB holds, for the larger layers), and the GEMMs' output rows lie kilobytes apart, each row tile
// on a dozen pages. On Linux, memory the user owns can be backed by transparent huge pages
// (madvise(MADV_HUGEPAGE); the kernel's default mode, "madvise", gives them to nothing else):
// docs/api.md has what it gains.
//
//   alignas(ct::huge_page_alignment<Layer::Params>) static Layer::Params params;
//   ct::advise_huge_pages(params);  // before its first write
//
// Only the whole 2 MB pages inside the object are advised (never memory beside it, so a small or
// unaligned object gets none and costs nothing extra). huge_page_alignment aligns objects of 2 MB
// and more to 2 MB (every whole page of them then advised) and leaves smaller ones as they are:
// small objects all aligned to 2 MB start on the same cache sets (slower: scripts/performance_log.md).
// The kernel backs a page with a huge one at
// its first touch: advise before loading the weights or zeroing the buffers (memory already
// touched is collapsed later, if ever, by khugepaged). No allocation, no exception; elsewhere than
// Linux, errc::not_supported and nothing changes.
#pragma once
#include <cstddef>
#include <cstdint>

#include "status.hpp"

#if defined(__linux__) && __has_include(<sys/mman.h>)
#include <sys/mman.h>
#endif

namespace ctformer {

inline constexpr std::size_t huge_page_bytes = std::size_t{2} << 20;

// alignas for an object of type Obj: 2 MB where it can hold a huge page, else its own alignment.
template <class Obj>
inline constexpr std::size_t huge_page_alignment = sizeof(Obj) >= huge_page_bytes ? huge_page_bytes : alignof(Obj);

struct huge_page_advice {
    status st;              // not_supported (no madvise here, or the kernel refused), out_of_range (wraps)
    std::size_t bytes = 0;  // bytes advised: the whole huge pages inside the range
};

// The whole huge pages inside [p, p + bytes): {first, end} addresses, first == end when none.
struct huge_page_span {
    std::uintptr_t first = 0, end = 0;
};
constexpr huge_page_span whole_huge_pages(std::uintptr_t p, std::size_t bytes) {
    const std::uintptr_t first = p / huge_page_bytes * huge_page_bytes + (p % huge_page_bytes ? huge_page_bytes : 0);
    const std::uintptr_t end = (p + bytes) / huge_page_bytes * huge_page_bytes;
    return end > first ? huge_page_span{first, end} : huge_page_span{first, first};
}

inline huge_page_advice advise_huge_pages(void* p, std::size_t bytes) noexcept {
    const auto at = reinterpret_cast<std::uintptr_t>(p);
    if (p == nullptr || bytes > UINTPTR_MAX - at) return {status::error(errc::out_of_range), 0};
    const huge_page_span s = whole_huge_pages(at, bytes);
    if (s.end == s.first) return {{}, 0};
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (madvise(reinterpret_cast<void*>(s.first), s.end - s.first, MADV_HUGEPAGE) != 0)
        return {status::error(errc::not_supported), 0};
    return {{}, static_cast<std::size_t>(s.end - s.first)};
#else
    return {status::error(errc::not_supported), 0};
#endif
}

// An object the user owns (a role, a tensor, a struct of them).
template <class Obj> huge_page_advice advise_huge_pages(Obj& obj) noexcept {
    return advise_huge_pages(static_cast<void*>(&obj), sizeof obj);
}

}  // namespace ctformer
