// libFuzzer target for load_checkpoint: any byte string either loads a GPT's params and its AdamW
// state completely or returns an error and leaves both byte-identical; after a successful load the
// optimizer's next step either runs or is refused with nothing written (no UB from a loaded step
// counter or moment). Built by .ci/run with clang -fsanitize=fuzzer,address,undefined; the seed
// (a valid checkpoint of this model, tests/fuzz/corpus_checkpoint) is written by the target itself
// when run with CTFORMER_WRITE_SEED=<path>.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>

#include <ctformer/ctformer.hpp>

namespace {
using Block = ct::DecoderOnlyBlock<ct::d_model<8>, ct::heads<2>, ct::ffn_dim<12>, ct::norm_first<true>>;
using Model = ct::GPT<5, 4, 1, Block>;
struct State {
    Model::Params params;
    ct::AdamW<Model::Params> opt;
};
State state, before;
Model::Grads grads;
std::byte seed_buf[1 << 16];

[[maybe_unused]] const bool seed_written = [] {
    const char* path = std::getenv("CTFORMER_WRITE_SEED");
    if (!path) return false;
    for (std::size_t i = 0; i < grads.tok_embeddings.weight.size; ++i) grads.tok_embeddings.weight.storage[i] = 0.01f * float(i % 7);
    (void)state.opt.step(state.params, grads);
    const ct::save_result r = ct::save_checkpoint(std::span<std::byte>(seed_buf), state.params, state.opt);
    if (std::FILE* f = std::fopen(path, "wb")) {
        std::fwrite(seed_buf, 1, r.bytes, f);
        std::fclose(f);
    }
    std::exit(r.st.ok() ? 0 : 1);
}();
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
    std::memcpy(&before, &state, sizeof state);
    ct::safetensors::file<64> f;
    if (!f.parse(bytes)) return 0;
    const ct::status st = ct::load_checkpoint(f, state.params, state.opt);
    (void)ct::to_string(st.code);
    if (!st) {
        if (std::memcmp(&before, &state, sizeof state) != 0) std::abort();  // a partial load
        return 0;
    }
    std::memcpy(&before, &state, sizeof state);
    const ct::status step = state.opt.step(state.params, grads);
    if (!step && std::memcmp(&before, &state, sizeof state) != 0) std::abort();  // a refused step wrote
    (void)state.opt.steps();
    return 0;
}
