// Fine-tuning on a microcontroller: rank-4 LoRA adapters (q and v, PEFT's default targets) trained
// on the board over the tiny Llama's int8 weights, which stay in flash, frozen. Adapters, their
// gradients, AdamW's state, the saved activations and the training workspace are static RAM —
// within 256 KB with a 16 KB stack region (the linker script gives the image exactly that); no heap, no
// exceptions, no RTTI. The new text's token ids come from the host (-DTINY_TEXT_IDS: the host build
// of this file encodes and prints them). Prints the loss over the text's windows before and after,
// each step's loss, the RAM of every role, instructions per step (qemu -icount) and the stack.
// Build and run: examples/cortex_m/finetune.sh (called by run.sh).
#include <cstring>
#include <string_view>

#include <ctformer/text/load.hpp>
#include <ctformer/train/memory_map.hpp>

#include "board.hpp"
#include "tiny_llama.hpp"
#include "tiny_weights.hpp"  // generated: extern "C" const tiny::lora_int8::Params tiny_weights (flash)
#ifndef TINY_TEXT_IDS
#include "tiny_tokenizer.hpp"
#endif

namespace ct = ctformer;
using Model = tiny::lora_int8;
constexpr std::size_t T = 5, steps = 24;  // windows of T + 1 tokens, batch 1
#ifdef TINY_TEXT_IDS
static const ct::token text[] = {TINY_TEXT_IDS};
#else
// (host) the new text, encoded here and printed for the board's build
constexpr std::string_view new_text =
    "On the board, the base weights stay in flash and only the adapters learn: A and B, a few "
    "kilobytes of RAM, trained by AdamW in static memory.";
static ct::tokenizer::Workspace<256> encode_ws;
static ct::token text[256];
#endif

// What training takes of the board's memories, every role's bytes known at compile time: a part
// with 256 KB of RAM (a 16 KB stack region aside: finetune.sh checks the painted depth) holds it.
using Map = ct::adapter_training_memory<Model, 1, T>;
using namespace ct::literals;
static_assert(ct::fits<Map, ct::board<256_KiB - 16_KiB, 1_MiB>>, "the adapter fine-tune does not fit the part");
static Model::Adapters adapters, grads;
static ct::AdamW<Model::Adapters> opt;
static Model::Activations<1, T> acts;
static Model::TrainWorkspace<1, T> ws;
static ct::Tensor<ct::token, 1, T> tokens, targets;
static_assert(sizeof adapters == Map::adapters && sizeof opt == Map::optimizer && sizeof acts == Map::activations &&
              sizeof ws == Map::workspace && sizeof tokens + sizeof targets == Map::batch);

namespace {
__attribute__((noinline)) void out(const char* s) { board::write(s); }
void out(std::uint32_t v) {
    char d[12], *p = d + sizeof d;
    *--p = 0;
    do *--p = char('0' + v % 10); while ((v /= 10) != 0);
    board::write(p);
}
void out_loss(float l) {  // three decimals, and the bits (the host's build prints the same)
    const std::uint32_t m = static_cast<std::uint32_t>(l * 1000.0f + 0.5f);
    out(m / 1000), out("."), out(m / 100 % 10), out(m / 10 % 10), out(m % 10);
    std::uint32_t bits;
    std::memcpy(&bits, &l, 4);
    char h[13] = " (0x";
    for (int i = 0; i < 8; ++i) h[4 + i] = "0123456789abcdef"[(bits >> (28 - 4 * i)) & 15];
    board::write(h), board::write(")");
}
void row(const char* role, std::size_t bytes) { out("  "), out(role), out(" "), out(static_cast<std::uint32_t>(bytes)), out("\n"); }

void window(std::size_t w) {
    for (std::size_t t = 0; t < T; ++t) tokens.storage[t] = text[w + t], targets.storage[t] = text[w + t + 1];
}
// The mean loss over every window of the text (training forward, no dropout: it saves into acts)
__attribute__((noinline)) float text_loss(std::size_t n) {
    float sum = 0;
    std::size_t k = 0;
    for (std::size_t w = 0; w + T + 1 <= n; w += T, ++k) {
        window(w);
        float l = 0;
        if (!Model::forward_train(ct::with_adapters(tiny_weights, adapters), ws, acts, tokens, targets, l,
                                  ct::dropout_config{0.0f, 0.0f, 0.0f, 0, 0}))
            return -1;
        sum += l;
    }
    return sum / static_cast<float>(k);
}
}  // namespace

extern "C" int firmware_main() {
    board::clock_start();
    const std::uint32_t per_tick = board::instructions_per_tick();
    board::stack_paint();
#ifdef TINY_TEXT_IDS
    const std::size_t n = sizeof text / sizeof text[0];
#else
    static constexpr ct::tokenizer tok = [] {
        ct::tokenizer t;
        (void)ct::make_tokenizer(tiny_tokenizer_tables, tiny_tokenizer_metadata, t);
        return t;
    }();
    std::size_t n = 0;
    if (!tok.encode(new_text, text, n, encode_ws)) return out("encode failed\n"), 1;
#endif
    out(TINY_BANNER "\n");
    ct::init_adapters(adapters, 7);
    opt.options.lr = 1e-2;
    const float before = text_loss(n);
    out("loss over the text before: "), out_loss(before), out("\n");
    std::uint32_t ticks = 0;
    for (std::size_t s = 0; s < steps; ++s) {
        window((s * T) % (n - T - 1));
        const auto pa = ct::with_adapters(tiny_weights, adapters);
        float l = 0;
        const std::uint32_t t0 = board::clock_now();
        ct::zero_grad(grads);
        ct::dropout_config dc{0.0f, 0.0f, 0.0f, 5, static_cast<std::uint32_t>(s)};
        dc.lora_p = 0.05f;
        if (!Model::forward_train(pa, ws, acts, tokens, targets, l, dc) || !Model::backward(pa, acts, ws, grads) ||
            !opt.step(adapters, grads))
            return out("step failed\n"), 1;
        ticks += board::clock_since(t0);
        out("step "), out(static_cast<std::uint32_t>(s)), out(" loss "), out_loss(l), out("\n");
    }
    const float after = text_loss(n);
    out("loss over the text after: "), out_loss(after), out("\n");
    const std::size_t stack = board::stack_used();
    out("memory map (bytes, compile time: ct::adapter_training_memory):\n");
    row("flash weights (frozen)", Map::params);
    row("ram adapters", Map::adapters);
    row("ram adapter_gradients", Map::gradients);
    row("ram adamw_state", Map::optimizer);
    row("ram activations", Map::activations);
    row("ram train_workspace", Map::workspace);
    row("ram batch", Map::batch);
    row("ram total", Map::ram);
#ifndef TINY_TEXT_IDS
    out("text ids:");
    for (std::size_t i = 0; i < n; ++i) out(i ? "," : " "), out(static_cast<std::uint32_t>(text[i]));
    out("\n");
#endif
    if (per_tick) out("instructions per step (qemu -icount): "), out(ticks / steps * per_tick), out("\n");
    if (stack) out("stack high-water mark: "), out(static_cast<std::uint32_t>(stack)), out(" bytes\n");
    return after < before ? 0 : (out("the loss did not fall\n"), 1);
}

#if !defined(__arm__)
int main() { board::exit(firmware_main() == 0); }
#endif
