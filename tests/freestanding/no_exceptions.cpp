// Built with -fno-exceptions -fno-rtti and linked; cmake/check_no_exceptions.cmake then checks the
// image: no exception machinery (__cxa_throw, std::__throw_*), no RTTI and no heap (malloc,
// operator new) reachable from the library's entry points used here — the loaders (safetensors,
// GGUF) included.
#include <ctformer/ctformer.hpp>
#include <ctformer/io/gguf_load.hpp>
#include <ctformer/text/generate.hpp>
#include <ctformer/text/load.hpp>

using L = ct::DecoderLayer<ct::d_model<32>, ct::heads<4>, ct::ffn_dim<64>>;
using Blk = ct::DecoderOnlyBlock<ct::d_model<32>, ct::heads<4>, ct::ffn_dim<64>, ct::norm_first<true>>;
using G = ct::GPT<16, 8, 2, Blk>;

static L::Params p;
static L::Workspace<1, 8, 8> ws;
static L::KVCache<1, 8> cache;
static L::CrossKVCache<1, 8> cc;
static L::StepWorkspace<1, 1> sws;
static ct::Tensor<float, 1, 8, 32> x, m, y;
static ct::Tensor<float, 1, 1, 32> step_in, step_out;
static G::Params gp;
static G::Grads gg;
static G::TrainWorkspace<1, 8> gws;
static G::Activations<1, 8> ga;
static G::KVCache<1, 8> gcache;
static G::GenerateWorkspace<4> gen;
static ct::Tensor<ct::token, 1, 8> t;
static ct::AdamW<G::Params> opt;
static ct::safetensors::file<512> f;
static std::byte buf[1 << 20];
static ct::safetensors::file<32> tf;
static ct::tokenizer tok;
static ct::tokenizer::Workspace<256> tws;
static ct::TextWorkspace<G, 64, 4> text_ws;
using Lm = ct::Llama<16, 8, 1, ct::d_model<32>, ct::heads<4>, ct::kv_heads<2>, ct::ffn_dim<64>, ct::weights<ct::int4_group<32>>>;
static Lm::Params lp;
static ct::gguf::file<32, 16> gf;

int main(int argc, char**) {
    int ok = 0;
    ok += ct::load_state_dict(p, std::span<const std::byte>(buf, static_cast<std::size_t>(argc) * 100)).ok();
    ok += L::forward(p, ws, x, m, y, ct::causal{}).ok();
    L::fill_cross_cache(p, sws, cc, m);
    ok += L::step(p, sws, cache, cc, step_in, step_out, ct::causal{}).ok();
    float loss = 0;
    ok += G::forward_train(gp, gws, ga, t, t, loss).ok() && G::backward(gp, ga, gws, gg).ok();
    ct::clip_grad_norm(gg, 1.0);
    ok += opt.step(gp, gg).ok();
    const ct::token prompt[1] = {1};
    ok += G::generate(gp, gen, gcache, prompt, 1, 3, ct::sampling{}, [](ct::token) { return true; }).ok();
    const ct::save_result r = ct::save_checkpoint(std::span<std::byte>(buf), gp, opt);
    ok += r.st.ok() && f.parse(std::span<const std::byte>(buf, r.bytes)).ok() && ct::load_checkpoint(f, gp, opt).ok();
    // a Llama from a GGUF file's bytes (every block format decoded, Q4_0 into int4 weights)
    if (gf.parse(std::span<const std::byte>(buf, static_cast<std::size_t>(argc) * 32)).ok()) ok += ct::load_gguf(lp, gf).ok();
    // text: a tokenizer from a file's bytes, encode, streaming decode, text generation
    if (tf.parse(std::span<const std::byte>(buf, static_cast<std::size_t>(argc) * 64)).ok() && ct::load_tokenizer(tf, tok).ok()) {
        ct::token ids[64];
        std::size_t n = 0;
        ok += tok.encode("text", ids, n, tws).ok();
        ct::text_decoder dec(tok);
        for (std::size_t i = 0; i < n; ++i) ok += dec.push(ids[i], [](std::string_view) {}).ok();
        ok += ct::generate_text(gp, text_ws, gcache, tok, "prompt", {.max_new = 2}, [](std::string_view) { return true; }).ok();
    }
    return ok == 0;
}
