// Text on a microcontroller: the tiny Llama (tiny_llama.hpp, trained by ctformer on this
// repository's docs) generates text on a Cortex-M, its int8 (or, -DTINY_INT4, int4) weights and its
// tokenizer's tables read in place from flash, the prompt encoded on the device, each token
// written out over semihosting as it is produced. KV cache, workspaces and sampler scratch are
// static RAM; no heap, no exceptions, no RTTI. Greedy decoding with a repetition penalty: the
// tokens are a pure function of the weights, so the host's scalar build of this file prints the
// same ones (run.sh compares them, and the logits' bits).
// Also printed: the memory map (every role's bytes, known at compile time), instructions per token
// (qemu -icount), the stack's high-water mark. Build and run: examples/cortex_m/run.sh.
#include <cstring>
#include <string_view>

#include <ctformer/text/load.hpp>
#include <ctformer/text/memory_map.hpp>

#include "board.hpp"
#include "tiny_llama.hpp"
#include "tiny_tokenizer.hpp"  // generated: the tokenizer's tables as constexpr data
#include "tiny_weights.hpp"    // generated: extern "C" const tiny::int8::Params tiny_weights (flash)

namespace ct = ctformer;
#ifdef TINY_INT4
using Model = tiny::int4;
#else
using Model = tiny::int8;
#endif
#ifndef TINY_PROMPT
#define TINY_PROMPT "A decoder layer"
#endif
#ifndef TINY_CHUNK
#define TINY_CHUNK 8  // prompt tokens per prefill step (1: the prompt token by token, GEMV only)
#endif
// -DTINY_PROMPT_IDS=396,411,13: the prompt's ids, encoded on the host (the firmware then links the
// tokenizer's decoder and the tables' check, not its encoder)
#ifdef TINY_PROMPT_IDS
constexpr std::size_t max_prompt = 0;
static const ct::token ids[] = {TINY_PROMPT_IDS};
#else
constexpr std::size_t max_prompt = 128;
static ct::tokenizer::Workspace<max_prompt> encode_ws;
static ct::token ids[max_prompt + 2];
#endif
constexpr std::size_t cache_len = 128, max_new = 48;  // (a cache shorter than the context)
using Map = ct::generation_memory<Model, cache_len, max_prompt, tiny_tokenizer_table_bytes, TINY_CHUNK>;
using namespace ct::literals;
// The MPS2 boards as qemu models them: 4 MB of SSRAM for code and read-only data, 4 MB for RAM.
static_assert(ct::fits<Map, ct::board<4_MiB, 4_MiB>>, "the model does not fit the board");
// (a Cortex-M4 part with 256 KB of SRAM and 1 MB of flash would hold it too)
static_assert(ct::fits<Map, ct::board<256_KiB, 1_MiB>>);

static Model::KVCache<1, cache_len> cache;
static Model::GenerateWorkspace<Map::chunk, Map::window> gen;
// The tokenizer of the tables in flash, made and checked by the compiler (the image has no code
// for the tables' check; a corrupt table is a compile error).
constexpr ct::status make_tok(ct::tokenizer& t) {
    const ct::status st = ct::make_tokenizer(tiny_tokenizer_tables, tiny_tokenizer_metadata, t);
    return st ? ct::check_tokenizer<Model>(t) : st;
}
constexpr ct::tokenizer made() {
    ct::tokenizer t;
    (void)make_tok(t);
    return t;
}
static_assert([] { ct::tokenizer t; return make_tok(t).ok(); }(), "the tokenizer's tables are rejected");
static constexpr ct::tokenizer tok = made();
static_assert(sizeof(Model::Params) == Map::params && sizeof cache == Map::cache && sizeof gen == Map::workspace);
#ifndef TINY_PROMPT_IDS
static_assert(sizeof encode_ws + sizeof ids == Map::encoding);
#endif

namespace {
__attribute__((noinline)) void out(std::string_view s) {  // (semihosting: NUL-terminated strings; off the deep path)
    char buf[64];
    while (!s.empty()) {
        const std::size_t n = s.size() < sizeof buf - 1 ? s.size() : sizeof buf - 1;
        std::memcpy(buf, s.data(), n);
        buf[n] = 0;
        board::write(buf);
        s.remove_prefix(n);
    }
}
void out(std::uint32_t v) {
    char d[12], *p = d + sizeof d;
    *--p = 0;
    do *--p = char('0' + v % 10); while ((v /= 10) != 0);
    board::write(p);
}
void hex(std::uint32_t v) {
    char d[11] = "0x";
    for (int i = 0; i < 8; ++i) d[2 + i] = "0123456789abcdef"[(v >> (28 - 4 * i)) & 15];
    d[10] = 0;
    board::write(d);
}
void row(const char* role, std::size_t bytes) {
    out("  "), out(role), out(" "), out(static_cast<std::uint32_t>(bytes)), out("\n");
}
}  // namespace

// Greedy, the last 64 tokens penalized (a tiny model repeats itself otherwise). The generation's
// state is static: the stack holds only the library's frames and scalars.
static constexpr ct::sampling greedy{.temperature = 0, .repetition_penalty = 1.3f, .penalty_last_n = Map::window};
static ct::text_decoder decoder(tok, false);
static struct {
    ct::token generated[max_new];
    std::size_t count = 0;
    std::uint32_t fnv = 2166136261u, t0 = 0, ticks = 0;  // (2^32 instructions: a few thousand tokens)
} run;

static bool on_token(ct::token t) {
    if (run.count > 0) run.ticks += board::clock_since(run.t0);  // one step: the previous token fed, this one chosen
    for (std::size_t j = 0; j < tiny::vocab; ++j) {  // the logits this token was chosen from, bit for bit
        std::uint32_t bits;
        std::memcpy(&bits, gen.next_logits.data() + j, 4);
        run.fnv = (run.fnv ^ bits) * 16777619u;
    }
    run.generated[run.count++] = t;
    (void)decoder.push(t, [](std::string_view piece) { out(piece); });
    run.t0 = board::clock_now();
    return true;
}

__attribute__((noinline)) static bool generate(std::size_t n) {
    decoder.continue_text();
    run.t0 = board::clock_now();
    // (only the code kept: a status is 100 bytes, and this frame is on the deepest path)
    const ct::errc code = Model::generate(tiny_weights, gen, cache, ids, n, max_new, greedy, [](ct::token t) { return on_token(t); }).code;
    decoder.finish([](std::string_view piece) { out(piece); });
    if (code != ct::errc::ok) out("\ngenerate failed: "), out(ct::to_string(code)), out("\n");
    return code == ct::errc::ok;
}
static void report(std::size_t n, std::uint32_t per_tick, std::size_t stack);

extern "C" int firmware_main() {
    board::clock_start();
    const std::uint32_t per_tick = board::instructions_per_tick();
    board::stack_paint();
    static constexpr std::string_view prompt = TINY_PROMPT;
#ifdef TINY_PROMPT_IDS
    const std::size_t n = sizeof ids / sizeof ids[0];
#else
    std::size_t n = 0;
    if (!tok.encode(prompt, ids, n, encode_ws).ok()) return out("prompt too long\n"), 1;
#endif
    out(TINY_BANNER "\n"), out(prompt);
    const bool ok = generate(n);
    const std::size_t stack = board::stack_used();
    if (!ok) return 1;
    report(n, per_tick, stack);
    return 0;
}

// The report after the text: tokens, the logits' hash, the memory map, instructions, stack.
__attribute__((noinline)) static void report(std::size_t n, std::uint32_t per_tick, std::size_t stack) {
    const std::size_t count = run.count;
    out("\n\ntokens:");
    for (std::size_t i = 0; i < count; ++i) out(" "), out(static_cast<std::uint32_t>(run.generated[i]));
    out("\nlogits fnv1a: "), hex(run.fnv), out("\n");
    out("memory map (bytes, compile time):\n");
    row("flash weights", Map::params);
    row("flash tokenizer_tables", Map::tables);
    row("ram kv_cache", Map::cache);
    row("ram generation_workspace", Map::workspace);
    row("ram prompt_encoding", Map::encoding);
    out("prompt ids:");
    for (std::size_t i = 0; i < n; ++i) out(i ? "," : " "), out(static_cast<std::uint32_t>(ids[i]));
    out("\n");
    if (per_tick && count > 1)
        out("instructions per token (qemu -icount): "), out(run.ticks / static_cast<std::uint32_t>(count - 1) * per_tick), out("\n");
    if (stack) out("stack high-water mark: "), out(static_cast<std::uint32_t>(stack)), out(" bytes\n");
}

#if !defined(__arm__)
int main() { board::exit(firmware_main() == 0); }
#endif
