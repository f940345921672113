// libFuzzer target for the safetensors loader: any byte string either loads completely or returns
// an error and leaves the params byte-identical (no crash, no UB under ASan/UBSan, no partial load).
// Built by .ci/run with clang -fsanitize=fuzzer,address,undefined; seeds in tests/fuzz/corpus.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include <ctformer/ctformer.hpp>

namespace {
using L = ct::DecoderLayer<ct::d_model<8>, ct::heads<2>, ct::ffn_dim<12>>;
L::Params params;
alignas(L::Params) unsigned char before[sizeof(L::Params)];
// the pre-quantized paths (packed integers, scales and minimums as F32 or F16, six-bit bytes, a
// format per matrix): seed corpus/layer_quantized is this type's save_state_dict
using Q = ct::DecoderLayer<ct::d_model<16>, ct::heads<2>, ct::ffn_dim<16>,
                           ct::weights<ct::int6_group_min<16, ct::f16>, ct::up_weights<ct::int4_group<8>>,
                                       ct::down_weights<ct::int8_per_channel>, ct::o_weights<ct::bf16>>>;
Q::Params qparams;
alignas(Q::Params) unsigned char qbefore[sizeof(Q::Params)];
// two-level scales (I8 integers and their F16 halves): seed corpus/linear_kscale is its save_state_dict
using K = ct::LinearParams<float, 8, 256, true, ct::int6_group_min<16, ct::kscale>>;
K kparams;
alignas(K) unsigned char kbefore[sizeof(K)];
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
    std::memcpy(before, &params, sizeof params);
    // the plain load, a prefixed load and a load with value checks: the three paths of the loader
    const ct::safetensors::load_options strict{.reject_non_finite = true, .max_abs = 1e6};
    for (int mode = 0; mode < 3; ++mode) {
        const ct::status st = mode == 0   ? ct::load_state_dict(params, bytes)
                              : mode == 1 ? ct::load_state_dict(params, bytes, "params.")
                                          : ct::load_state_dict(params, bytes, "", strict);
        if (!st && std::memcmp(before, &params, sizeof params) != 0) std::abort();  // a partial load
        if (st) std::memcpy(before, &params, sizeof params);
        (void)ct::to_string(st.code);
    }
    std::memcpy(qbefore, &qparams, sizeof qparams);
    const ct::status qs = ct::load_state_dict(qparams, bytes);
    if (!qs && std::memcmp(qbefore, &qparams, sizeof qparams) != 0) std::abort();
    std::memcpy(kbefore, &kparams, sizeof kparams);
    const ct::status ks = ct::load_state_dict(kparams, bytes, "", strict);
    if (!ks && std::memcmp(kbefore, &kparams, sizeof kparams) != 0) std::abort();
    ct::safetensors::file<16> f;  // the index alone, and reading one tensor by name
    if (f.parse(bytes)) {
        ct::Tensor<float, 8> t;
        (void)ct::read_tensor(f, "norm1.weight", t);
        for (std::size_t i = 0; i < f.size(); ++i) (void)f.metadata(f[i].name);
    }
    return 0;
}
