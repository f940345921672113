// ctformer/core/role_size.hpp — every memory role's byte size, and whether a set of roles fits a
// part's memories (ct::board, ct::fits: the memory maps of text/memory_map.hpp and
// train/memory_map.hpp).
//
// A role's `bytes` is what the user must reserve for it: the size of the object, alignment padding
// included, so `bytes == sizeof(Role)` always (tests static_assert it for every role). A role gets
// it by deriving from sized_role<Role> (defined here, out of line, because a class cannot take its
// own sizeof inside its body).
#pragma once
#include <cstddef>

namespace ctformer {

template <class Role> struct sized_role {
    static const std::size_t bytes;
};
template <class Role> const std::size_t sized_role<Role>::bytes = sizeof(Role);

namespace literals {
consteval std::size_t operator""_KiB(unsigned long long n) { return static_cast<std::size_t>(n) << 10; }
consteval std::size_t operator""_MiB(unsigned long long n) { return static_cast<std::size_t>(n) << 20; }
}  // namespace literals

// A part's memories: RAM for a memory map's roles (stack and the program's own data aside), flash
// for its read-only data (code aside).
template <std::size_t Ram, std::size_t Flash> struct board {
    static constexpr std::size_t ram = Ram, flash = Flash;
};
// Whether a memory map (anything with ram and flash byte counts) fits a board.
template <class Map, class Board> inline constexpr bool fits = Map::ram <= Board::ram && Map::flash <= Board::flash;

}  // namespace ctformer
