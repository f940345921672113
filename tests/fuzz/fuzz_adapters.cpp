// libFuzzer target for LoRA adapter files (io/adapters.hpp): an input is adapter_config.json's text,
// a NUL byte, then adapter_model.safetensors' bytes (no NUL: the config alone). Any input either
// loads a Llama's adapters completely — the config then equals the type's (checked again here) — or
// returns an error and leaves the adapters byte-identical; check_adapter_config alone never reads
// outside its text. Built by .ci/run with clang -fsanitize=fuzzer,address,undefined; the seed
// (a valid config and adapter file of this model, tests/fuzz/corpus_adapters) is written by the
// target itself when run with CTFORMER_WRITE_SEED=<path>.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string_view>

#include <ctformer/ctformer.hpp>

namespace {
using Model = ct::Llama<16, 8, 2, ct::d_model<16>, ct::heads<4>, ct::kv_heads<2>, ct::ffn_dim<32>, ct::norm_eps<1, 100000>,
                        ct::lora<4, 8, ct::lora_q | ct::lora_v | ct::lora_down>>;
Model::Adapters adapters, before;
std::byte seed_buf[1 << 16];

[[maybe_unused]] const bool seed_written = [] {
    const char* path = std::getenv("CTFORMER_WRITE_SEED");
    if (!path) return false;
    ct::init_adapters(adapters, 7);
    char* json = reinterpret_cast<char*>(seed_buf);
    const std::size_t n = ct::write_adapter_config<Model::Adapters>(std::span<char>(json, 1024), 0.05f);
    seed_buf[n] = std::byte{0};
    const ct::save_result r = ct::save_adapters(adapters, std::span<std::byte>(seed_buf).subspan(n + 1));
    if (std::FILE* f = std::fopen(path, "wb")) {
        std::fwrite(seed_buf, 1, n + 1 + r.bytes, f);
        std::fclose(f);
    }
    std::exit(r.st.ok() && n < 1024 ? 0 : 1);
}();
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const char* text = reinterpret_cast<const char*>(data);
    const void* nul = std::memchr(data, 0, size);
    const std::size_t json_len = nul ? static_cast<std::size_t>(static_cast<const std::uint8_t*>(nul) - data) : size;
    const std::string_view config(text, json_len);
    const ct::status checked = ct::check_adapter_config<Model::Adapters>(config);
    (void)ct::to_string(checked.code);
    if (!nul) return 0;
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data) + json_len + 1, size - json_len - 1);
    ct::safetensors::file<64> f;
    if (!f.parse(bytes)) return 0;
    std::memcpy(&before, &adapters, sizeof adapters);
    ct::safetensors::load_options opt;
    opt.reject_non_finite = true;
    const ct::status st = ct::load_adapters(adapters, f, config, ct::peft_prefix, opt);
    if (!st) {
        if (std::memcmp(&before, &adapters, sizeof adapters) != 0) std::abort();  // a partial load
        return 0;
    }
    if (!config.empty() && !checked) std::abort();  // loaded past a config the check refused
    return 0;
}
