// ctformer/core/status.hpp — error values: every fallible operation returns a status naming the
// problem and, where there is one, the tensor it concerns. No exceptions, no heap.
#pragma once
#include <array>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string_view>

namespace ctformer {

enum class errc : std::uint8_t {
    ok = 0,
    malformed_header,   // not a safetensors header (JSON syntax, missing fields, bad values)
    truncated,          // the buffer ends before the header or a tensor's data
    unsupported_dtype,  // a dtype string safetensors does not define
    bad_offsets,        // data_offsets disagree with dtype x shape, or point outside the buffer
    overlapping_data,   // two tensors share bytes
    duplicate_tensor,   // a name appears twice
    too_many_tensors,   // more tensors than the index's capacity
    missing_tensor,     // the params need a tensor the file lacks
    unexpected_tensor,  // the file has a tensor (under the prefix) the params do not
    wrong_shape,        // a tensor's shape differs from the params'
    wrong_dtype,        // a tensor's dtype cannot be converted to the params' type
    buffer_too_small,   // the writer's output buffer is too small
    cache_full,         // appending would exceed a KV cache's capacity (nothing was appended)
    cache_empty,        // a cross-attention cache was used before it was filled
    out_of_range,       // a length or index beyond what exists
    no_activations,     // backward was given Activations that no forward_train filled
    non_finite,         // a NaN or inf where finite values are required (check_finite, load options)
    value_out_of_range, // a value that does not fit the destination type (e.g. F64 1e300 into float)
    not_supported,      // the platform or its kernel does not offer it (advise_huge_pages off Linux)
    invalid_option,     // an option outside its domain (a NaN learning rate, a probability outside [0, 1])
    aliased_output,     // an output overlaps an input it may not alias (the memory, or part of tgt)
    config_mismatch,    // the file's configuration (its metadata) differs from the C++ type's
    io_error,           // a file could not be opened, sized, read or mapped (io/file.hpp)
    malformed_tables,   // a tokenizer's tables disagree (sizes, offsets, ids, hashes: text/tables.hpp)
    cache_mismatch,     // a cross-attention cache filled through other adapters than the step runs
};

inline constexpr const char* to_string(errc e) {
    switch (e) {
        case errc::ok: return "ok";
        case errc::malformed_header: return "malformed header";
        case errc::truncated: return "truncated";
        case errc::unsupported_dtype: return "unsupported dtype";
        case errc::bad_offsets: return "bad data_offsets";
        case errc::overlapping_data: return "overlapping data";
        case errc::duplicate_tensor: return "duplicate tensor";
        case errc::too_many_tensors: return "too many tensors";
        case errc::missing_tensor: return "missing tensor";
        case errc::unexpected_tensor: return "unexpected tensor";
        case errc::wrong_shape: return "wrong shape";
        case errc::wrong_dtype: return "wrong dtype";
        case errc::buffer_too_small: return "buffer too small";
        case errc::cache_full: return "cache full";
        case errc::cache_empty: return "cache empty";
        case errc::out_of_range: return "out of range";
        case errc::no_activations: return "no activations (run forward_train first)";
        case errc::non_finite: return "non-finite value";
        case errc::value_out_of_range: return "value out of the destination type's range";
        case errc::not_supported: return "not supported on this platform";
        case errc::invalid_option: return "invalid option";
        case errc::aliased_output: return "output overlaps an input it may not alias";
        case errc::config_mismatch: return "configuration mismatch";
        case errc::io_error: return "file I/O error";
        case errc::malformed_tables: return "malformed tokenizer tables";
        case errc::cache_mismatch: return "cache filled through other adapters";
    }
    return "?";
}

// An error value: the problem and the tensor it concerns (empty when it concerns the file).
struct status {
    errc code = errc::ok;
    std::array<char, 96> tensor{};
    constexpr explicit operator bool() const { return code == errc::ok; }
    constexpr bool ok() const { return code == errc::ok; }
    constexpr std::string_view tensor_name() const { return std::string_view(tensor.data()); }
    // The name is prefix + name (+ suffix), cut to 95 characters.
    static constexpr status error(errc c, std::string_view name = {}, std::string_view more = {},
                                  std::string_view suffix = {}) {
        status s;
        s.code = c;
        std::size_t n = 0;
        for (std::string_view part : {name, more, suffix})
            for (std::size_t i = 0; i < part.size() && n + 1 < s.tensor.size(); ++i) s.tensor[n++] = part[i];
        return s;
    }
};

}  // namespace ctformer
