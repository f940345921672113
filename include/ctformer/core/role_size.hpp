// ctformer/core/role_size.hpp — every memory role's byte size.
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

}  // namespace ctformer
