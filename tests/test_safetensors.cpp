// safetensors reader/writer: round trips, dtype conversion, and every malformed or mismatched
// input rejected with an error value naming the tensor, leaving the params untouched.
#include <cstring>
#include <limits>

#include "common.hpp"
#include "reference.hpp"

namespace {
using L = ct::DecoderOnlyBlock<ct::d_model<8>, ct::heads<2>, ct::ffn_dim<12>>;

struct spec {
    std::string name, dtype;
    std::vector<std::size_t> shape;
    long long extra_bytes = 0;  // declared span minus the correct one
    std::size_t gap_before = 0;  // unused bytes in the data section before this tensor
};
std::size_t dsize(const std::string& d) {
    return d == "F64" || d == "I64" ? 8 : d == "BOOL" || d == "U8" ? 1 : d == "F16" || d == "BF16" ? 2 : 4;
}

// A safetensors buffer from specs (data: an increasing ramp so values are checkable).
std::vector<std::byte> build(const std::vector<spec>& specs, const std::string& header_override = "",
                             std::size_t trailing = 0) {
    std::string h = "{\"__metadata__\":{\"format\":\"pt\"}";
    std::size_t off = 0;
    for (const spec& s : specs) {
        std::size_t n = 1;
        for (auto d : s.shape) n *= d;
        const std::size_t bytes = static_cast<std::size_t>(static_cast<long long>(n * dsize(s.dtype)) + s.extra_bytes);
        off += s.gap_before;
        h.append(",\"").append(s.name).append("\":{\"dtype\":\"").append(s.dtype).append("\",\"shape\":[");
        for (std::size_t i = 0; i < s.shape.size(); ++i) h.append(i ? "," : "").append(std::to_string(s.shape[i]));
        h.append("],\"data_offsets\":[").append(std::to_string(off)).append(",").append(std::to_string(off + bytes)).append("]}");
        off += bytes;
    }
    h += "}";
    if (!header_override.empty()) h = header_override, off = 64;
    std::vector<std::byte> out(8 + h.size() + off + trailing);
    std::uint64_t hn = h.size();
    for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = std::byte((hn >> (8 * i)) & 0xff);
    std::memcpy(out.data() + 8, h.data(), h.size());
    std::size_t k = 8 + h.size();
    for (const spec& s : specs) {
        std::size_t n = 1;
        for (auto d : s.shape) n *= d;
        k += s.gap_before;
        for (std::size_t i = 0; i < n && k + dsize(s.dtype) <= out.size(); ++i) {
            if (s.dtype == "F64") { double v = 0.001 * double(i); std::memcpy(&out[k], &v, 8); }
            else if (s.dtype == "F32") { float v = 0.001f * float(i); std::memcpy(&out[k], &v, 4); }
            k += dsize(s.dtype);
        }
        k += static_cast<std::size_t>(std::max(0LL, s.extra_bytes));
    }
    return out;
}

std::vector<spec> layer_specs(const std::string& prefix, const std::string& dtype = "F32") {
    static L::Params p;
    std::vector<spec> v;
    ct::for_each_tensor(p, [&](std::string_view n, const auto& t) {
        v.push_back({prefix + std::string(n), dtype, std::vector<std::size_t>(t.shape.begin(), t.shape.end())});
    });
    return v;
}

std::vector<std::byte> snapshot(const L::Params& p) {
    std::vector<std::byte> b(ct::save_state_dict(p, {}).bytes);
    REQUIRE(ct::save_state_dict(p, b).st.ok());
    return b;
}

void expect_error(const std::vector<std::byte>& file, ct::errc code, const std::string& tensor, const char* prefix = "",
                  const ct::safetensors::load_options& opt = {}) {
    static L::Params p;
    ref::randomize(p, 5);
    const auto before = snapshot(p);
    const ct::status st = ct::load_state_dict(p, file, prefix, opt);
    INFO("expected " << std::string(ct::to_string(code)) << " '" << tensor << "', got " << std::string(ct::to_string(st.code)) << " '"
                     << std::string(st.tensor_name()) << "'");
    CHECK(st.code == code);
    CHECK(std::string(st.tensor_name()) == tensor);
    CHECK(snapshot(p) == before);  // nothing written
}
}  // namespace

TEST_CASE("safetensors: writer/reader round trip, prefixes, F64 -> F32 conversion") {
    static L::Params a, b;
    ref::randomize(a, 1);
    std::vector<std::byte> buf(ct::save_state_dict(a, {}, "layers.0.").bytes);
    CHECK(ct::save_state_dict(a, std::span<std::byte>(buf.data(), 10)).st.code == ct::errc::buffer_too_small);
    REQUIRE(ct::save_state_dict(a, buf, "layers.0.").st.ok());
    REQUIRE(ct::load_state_dict(b, buf, "layers.0.").ok());
    CHECK(snapshot(a) == snapshot(b));

    const auto f64 = build(layer_specs("", "F64"));
    REQUIRE(ct::load_state_dict(b, f64).ok());
    CHECK(b.ffn.linear1.weight.get(5) == 0.005f);
    CHECK(b.norm2.bias.get(7) == 0.007f);

    // The fixture files: params are found under "params." next to inputs and grads.
    const auto fixture = test::read_file("gpt_block_f64_post.safetensors");
    ct::safetensors::file<128> f;
    REQUIRE(f.parse(fixture).ok());
    CHECK(f.metadata("kind") == "decoder_only");
    CHECK(f.metadata("nope").empty());
    CHECK(f.find("params.linear1.weight") != nullptr);
}

TEST_CASE("safetensors: malformed files are errors, params untouched") {
    const auto good = build(layer_specs(""));
    static L::Params sane;
    REQUIRE(ct::load_state_dict(sane, good).ok());  // sanity: the good file loads

    expect_error(std::vector<std::byte>(good.begin(), good.begin() + 5), ct::errc::truncated, "");
    expect_error(std::vector<std::byte>(good.begin(), good.end() - 3), ct::errc::truncated, "norm2.bias");
    auto huge = good;
    huge[6] = std::byte{1};  // header length beyond the buffer
    expect_error(huge, ct::errc::truncated, "");

    const std::string bad_headers[] = {"nope", "{", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}} x",
                                       "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", "{\"a\":{\"dtype\":\"F32\",\"shape\":[01],\"data_offsets\":[0,4]}}",
                                       "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}",
                                       "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}",
                                       "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}",
                                       "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],}}",
                                       "{\"__metadata__\":{\"k\":1}}", "{\"a\x01\":{}}"};
    for (const auto& h : bad_headers) {
        INFO("header: " << h);
        const auto f = build({}, h);
        ct::safetensors::file<8> idx;
        const ct::status st = idx.parse(f);
        CHECK(st.code == ct::errc::malformed_header);
    }
    expect_error(build({{"a", "F33", {1}}}), ct::errc::unsupported_dtype, "a");
    expect_error(build({{"a", "F32", {2, 2}, 4}}), ct::errc::bad_offsets, "a");
    expect_error(build({{"a", "F32", {2}, 0}, {"a", "F32", {2}, 0}}), ct::errc::duplicate_tensor, "a");
    expect_error(build({}, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                           "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}"),
                 ct::errc::overlapping_data, "b");
    expect_error(build({}, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,8]}}"),
                 ct::errc::bad_offsets, "a");
    {
        ct::safetensors::file<4> small;
        CHECK(small.parse(good).code == ct::errc::too_many_tensors);
    }
}

TEST_CASE("safetensors: name, shape and dtype mismatches are errors, params untouched") {
    auto specs = layer_specs("params.");
    {
        auto s = specs;
        s.erase(s.begin() + 3);
        expect_error(build(s), ct::errc::missing_tensor, "params.self_attn.out_proj.bias", "params.");
    }
    {
        auto s = specs;
        s.push_back({"params.linear3.weight", "F32", {2}});
        s.push_back({"grad.whatever", "F32", {2}});  // outside the prefix: ignored
        expect_error(build(s), ct::errc::unexpected_tensor, "params.linear3.weight", "params.");
    }
    {
        auto s = specs;
        s[6].shape = {8, 13};
        expect_error(build(s), ct::errc::wrong_shape, "params.linear2.weight: expected (8, 12), found (8, 13)", "params.");
        s[6].shape = {8, 12, 1};
        expect_error(build(s), ct::errc::wrong_shape, "params.linear2.weight: expected (8, 12), found (8, 12, 1)",
                     "params.");
    }
    {
        auto s = specs;
        s[2].dtype = "I32";
        expect_error(build(s), ct::errc::wrong_dtype, "params.self_attn.out_proj.weight: I32 into a float", "params.");
    }
    {  // a wrong prefix: the first tensor looked up, and the prefixes the file has
        expect_error(build(specs), ct::errc::missing_tensor,
                     "layers.0.self_attn.in_proj_weight: nothing under 'layers.0.'; the file has 'params.'", "layers.0.");
    }
}

TEST_CASE("safetensors: F16 and BF16 widen exactly into float tensors; I32 and I64 ids into integer tensors") {
    // one file, raw little-endian values
    const std::uint16_t h[5] = {0x3C00, 0xC100, 0x7BFF, 0x0001, 0x7C00};  // 1, -2.5, 65504, 2^-24, inf
    const std::uint16_t b[2] = {0x3F80, 0xC020};                          // 1, -2.5
    const std::int64_t i64[3] = {5, -100, 7};
    const std::int32_t i32[2] = {7, -8};
    const std::int64_t big[1] = {std::int64_t{1} << 40};
    const std::string header = "{\"h\":{\"dtype\":\"F16\",\"shape\":[5],\"data_offsets\":[0,10]},"
                               "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[10,14]},"
                               "\"i\":{\"dtype\":\"I64\",\"shape\":[3],\"data_offsets\":[14,38]},"
                               "\"j\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[38,46]},"
                               "\"big\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[46,54]}}";
    std::vector<std::byte> file(8 + header.size() + 54);
    const std::uint64_t hn = header.size();
    std::memcpy(file.data(), &hn, 8);
    std::memcpy(file.data() + 8, header.data(), header.size());
    std::byte* d = file.data() + 8 + header.size();
    std::memcpy(d, h, 10), std::memcpy(d + 10, b, 4), std::memcpy(d + 14, i64, 24), std::memcpy(d + 38, i32, 8);
    std::memcpy(d + 46, big, 8);
    ct::safetensors::file<8> f;
    REQUIRE(f.parse(file).ok());
    ct::Tensor<float, 5> hf;
    ct::Tensor<double, 2> bd;
    ct::Tensor<ct::token, 3> ids;
    ct::Tensor<ct::token, 2> ids32;
    REQUIRE(ct::read_tensor(f, "h", hf).ok());
    CHECK(hf.storage[0] == 1.0f);
    CHECK(hf.storage[1] == -2.5f);
    CHECK(hf.storage[2] == 65504.0f);
    CHECK(hf.storage[3] == 0x1p-24f);
    CHECK(hf.storage[4] == std::numeric_limits<float>::infinity());
    CHECK(ct::read_tensor(f, "h", hf, {.reject_non_finite = true}).code == ct::errc::non_finite);
    REQUIRE(ct::read_tensor(f, "b", bd).ok());
    CHECK(bd.storage[0] == 1.0);
    CHECK(bd.storage[1] == -2.5);
    REQUIRE(ct::read_tensor(f, "i", ids).ok());
    CHECK(ids.storage[0] == 5);
    CHECK(ids.storage[1] == -100);
    REQUIRE(ct::read_tensor(f, "j", ids32).ok());
    CHECK(ids32.storage[1] == -8);
    ct::Tensor<ct::token, 1> one;
    const ct::status st = ct::read_tensor(f, "big", one);  // 2^40 does not fit 32-bit ids
    CHECK(st.code == ct::errc::value_out_of_range);
    CHECK(st.tensor_name() == "big");
    CHECK(ct::read_tensor(f, "h", ids32).code == ct::errc::wrong_dtype);
    CHECK(std::string(ct::read_tensor(f, "j", ids).tensor_name()) == "j: expected (3), found (2)");
    CHECK(std::string(ct::read_tensor(f, "i", bd).tensor_name()) == "i: I64 into a float");
}

// Regression tests of the defects issue 11 found (each failed before its fix).
TEST_CASE("safetensors: data-section gaps and trailing bytes are errors (as in the reference reader)") {
    auto specs = layer_specs("");
    static L::Params p;
    REQUIRE(ct::load_state_dict(p, build(specs)).ok());
    specs[3].gap_before = 4;
    expect_error(build(specs), ct::errc::bad_offsets, specs[3].name);
    expect_error(build(layer_specs(""), "", 4), ct::errc::bad_offsets, "");
    expect_error(build(layer_specs(""), "", 1), ct::errc::bad_offsets, "");
}

TEST_CASE("safetensors: escaped names are decoded (lookup, duplicates), bad escapes are malformed") {
    auto specs = layer_specs("");
    for (auto& sp : specs)
        if (sp.name == "norm2.bias") sp.name = "norm2.bia\\u0073";  // JSON for "norm2.bias"
    static L::Params a, b;
    REQUIRE(ct::load_state_dict(a, build(layer_specs(""))).ok());
    const ct::status st = ct::load_state_dict(b, build(specs));
    INFO(ct::to_string(st.code) << " " << std::string(st.tensor_name()));
    REQUIRE(st.ok());
    CHECK(snapshot(a) == snapshot(b));
    auto dup = layer_specs("");
    dup.push_back({"norm2.bia\\u0073", "F32", {8}});
    expect_error(build(dup), ct::errc::duplicate_tensor, "norm2.bia\\u0073");
    auto esc = layer_specs("");  // every escape form, and a two-unit (surrogate pair) character
    esc.push_back({"x\\\"\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00", "F32", {1}});
    expect_error(build(esc), ct::errc::unexpected_tensor, esc.back().name);
    for (const std::string& bad : std::vector<std::string>{"\\ud83d", "\\ude00", "\\ud83dx", "\\u12", "\\x",
                                                           std::string("\\\0", 2)}) {
        auto s = layer_specs("");  // (the last: a backslash and a NUL byte, found by the fuzzer)
        s.push_back({"y" + bad, "F32", {1}});
        ct::safetensors::file<32> idx;
        INFO(bad);
        CHECK(idx.parse(build(s)).code == ct::errc::malformed_header);
    }
    ct::safetensors::file<32> idx;  // the decoded name is found by its plain spelling
    const auto esc_file = build(esc);  // the index points into it
    REQUIRE(idx.parse(esc_file).ok());
    CHECK(idx.find("x\"/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80") != nullptr);
}

TEST_CASE("safetensors: values that do not fit are errors; non-finite and range options") {
    auto specs = layer_specs("", "F64");
    auto file = build(specs);
    const double big = 1e300, nan = std::numeric_limits<double>::quiet_NaN();
    std::memcpy(file.data() + file.size() - 8, &big, 8);  // last element of the last tensor
    const std::string last = specs.back().name;
    expect_error(file, ct::errc::value_out_of_range, last);  // float layer: never a silent inf
    using LD = ct::DecoderOnlyBlock<ct::d_model<8>, ct::heads<2>, ct::ffn_dim<12>, ct::dtype<double>>;
    static LD::Params d;
    CHECK(ct::load_state_dict(d, file).ok());  // a double layer holds it
    std::memcpy(file.data() + file.size() - 8, &nan, 8);
    static L::Params p;
    CHECK(ct::load_state_dict(p, file).ok());  // NaN is accepted unless asked
    expect_error(file, ct::errc::non_finite, last, "", {.reject_non_finite = true});
    expect_error(build(specs), ct::errc::value_out_of_range, specs[0].name, "", {.max_abs = 1e-4});
    CHECK(ct::load_state_dict(p, build(specs), "", {.reject_non_finite = true, .max_abs = 1e3}).ok());
}

TEST_CASE("safetensors: the convenience overload's stack index size is what docs/weights.md says") {
    if constexpr (sizeof(void*) == 8) CHECK(sizeof(ct::safetensors::file<128>) == 13352);
}

// ---- #60's defects of the loaders, each a regression case ----
namespace {
// A file of one tensor: name, dtype, shape, raw bytes.
std::vector<std::byte> one_tensor(const std::string& name, const std::string& dtype, std::vector<std::size_t> shape,
                                  const std::vector<unsigned char>& data) {
    std::string h = "{\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":[";
    for (std::size_t i = 0; i < shape.size(); ++i) h += (i ? "," : "") + std::to_string(shape[i]);
    h += "],\"data_offsets\":[0," + std::to_string(data.size()) + "]}}";
    std::vector<std::byte> out(8 + h.size() + data.size());
    for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = std::byte((h.size() >> (8 * i)) & 0xff);
    std::memcpy(out.data() + 8, h.data(), h.size());
    std::memcpy(out.data() + 8 + h.size(), data.data(), data.size());
    return out;
}
}  // namespace

TEST_CASE("safetensors: an I64 or I32 value below zero into an unsigned tensor is value_out_of_range, nothing written") {
    ct::Tensor<std::uint64_t, 2> u64;
    ct::Tensor<std::uint32_t, 2> u32;
    u64.storage[0] = u64.storage[1] = 7;
    u32.storage[0] = u32.storage[1] = 7;
    const std::vector<unsigned char> minus_one_i64 = {1, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    const std::vector<unsigned char> minus_one_i32 = {1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
    const auto f64 = one_tensor("ids", "I64", {2}, minus_one_i64), f32 = one_tensor("ids", "I32", {2}, minus_one_i32);
    ct::safetensors::file<4> f;
    REQUIRE(f.parse(f64).ok());
    CHECK(ct::read_tensor(f, "ids", u64).code == ct::errc::value_out_of_range);
    CHECK(ct::read_tensor(f, "ids", u32).code == ct::errc::value_out_of_range);
    REQUIRE(f.parse(f32).ok());
    CHECK(ct::read_tensor(f, "ids", u32).code == ct::errc::value_out_of_range);
    CHECK((u64.storage[1] == 7 && u32.storage[1] == 7));
    // and in range: loads
    const auto ok = one_tensor("ids", "I64", {2}, {1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0});
    REQUIRE(f.parse(ok).ok());
    REQUIRE(ct::read_tensor(f, "ids", u64).ok());
    CHECK((u64.storage[0] == 1 && u64.storage[1] == 2));
}

TEST_CASE("safetensors: read_file of a directory is io_error naming the path") {
    static std::byte storage[1 << 16];
    const ct::file_read r = ct::read_file(CTFORMER_TEST_DATA, storage);
    CHECK(r.st.code == ct::errc::io_error);
    CHECK(std::string(r.st.tensor_name()).starts_with(CTFORMER_TEST_DATA));
}

TEST_CASE("safetensors: an index re-parsed from a buffer that fails keeps no view of that buffer") {
    ct::safetensors::file<8> f;
    const auto good = one_tensor("x", "F32", {1}, {0, 0, 0x80, 0x3f});
    REQUIRE(f.parse(good).ok());
    {
        // a header with metadata, then a bad tensor: parse fails after it saw the metadata
        std::string h = "{\"__metadata__\":{\"ctformer.kind\":\"gpt\"},\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}";
        std::vector<std::byte> bad(8 + h.size() + 4);
        for (int i = 0; i < 8; ++i) bad[static_cast<std::size_t>(i)] = std::byte((h.size() >> (8 * i)) & 0xff);
        std::memcpy(bad.data() + 8, h.data(), h.size());
        CHECK(!f.parse(bad).ok());
    }  // (bad is freed here)
    CHECK(f.size() == 0);
    CHECK(f.metadata("ctformer.kind").empty());  // (ASan: no read of the freed buffer)
}
