// expect: ctformer_error_a_key_length_cannot_be_negative
#include <ctformer/ctformer.hpp>
auto m = ct::key_lengths{-1, 5};
