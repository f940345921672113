// ctformer's main demo: a decoder layer loaded from a PyTorch fixture committed in the repo
// (tests/data/medium_pre_gelu.safetensors: nn.TransformerDecoderLayer(128, 8, 512, gelu,
// norm_first=True), causal), run on the fixture's input; prints the agreement with PyTorch's
// output and the latency.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <vector>

#include <ctformer/ctformer.hpp>

using Layer = ct::DecoderLayer<ct::d_model<128>, ct::heads<8>, ct::ffn_dim<512>, ct::norm_first<true>,
                               ct::activation<ct::gelu>>;
constexpr std::size_t B = 1, T = 32, S = 48;

// Every big object in static storage: nothing on the heap, nothing big on the stack.
static Layer::Params params;
static Layer::Workspace<B, T, S> workspace;
static ct::Tensor<float, B, T, 128> tgt, out, expected;
static ct::Tensor<float, B, S, 128> memory;
static std::byte file_bytes[4 << 20];
static ct::safetensors::file<128> file;

int main(int argc, char** argv) {
    const char* path = argc > 1 ? argv[1] : CTFORMER_DEMO_FIXTURE;
    std::ifstream in(path, std::ios::binary);
    in.read(reinterpret_cast<char*>(file_bytes), sizeof file_bytes);
    const auto n = static_cast<std::size_t>(in.gcount());
    if (n == 0) return std::fprintf(stderr, "cannot read %s\n", path), 1;

    for (ct::status st : {file.parse({file_bytes, n}), ct::load_state_dict(params, file, "params."),
                          ct::read_tensor(file, "input.tgt", tgt), ct::read_tensor(file, "input.memory", memory),
                          ct::read_tensor(file, "output", expected)})
        if (!st) return std::fprintf(stderr, "load failed: %s (%s)\n", ct::to_string(st.code), st.tensor.data()), 1;

    if (ct::status st = Layer::forward(params, workspace, tgt, memory, out, ct::causal{}); !st)
        return std::fprintf(stderr, "forward failed: %s (%s)\n", ct::to_string(st.code), st.tensor.data()), 1;
    double max_abs = 0;
    for (std::size_t i = 0; i < out.size; ++i) max_abs = std::max(max_abs, double(std::fabs(out.storage[i] - expected.storage[i])));

    std::vector<double> us;
    for (int rep = 0; rep < 200; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        (void)Layer::forward(params, workspace, tgt, memory, out, ct::causal{});  // checked above: same inputs
        us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(us.begin(), us.end());
    std::printf("ctformer demo — %s (PyTorch %.*s)\n", path, int(file.metadata("torch_version").size()),
                file.metadata("torch_version").data());
    std::printf("layer: TransformerDecoderLayer d_model=128 heads=8 ffn=512 gelu pre-norm, causal; B=%zu T=%zu S=%zu\n",
                B, T, S);
    std::printf("simd arch: %s; params %zu KiB, workspace %zu KiB (static storage)\n", ct::simd::arch_name(),
                sizeof(params) / 1024, Layer::Workspace<B, T, S>::bytes / 1024);
    std::printf("agreement with PyTorch: max abs error %.3g (tolerance 2e-5) -> %s\n", max_abs,
                max_abs <= 2e-5 ? "OK" : "MISMATCH");
    std::printf("latency: median %.1f us, min %.1f us over %zu runs (1 thread)\n", us[us.size() / 2], us[0], us.size());
    return max_abs <= 2e-5 ? 0 : 1;
}
