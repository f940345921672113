// README's "From PyTorch", as a program: the alias tools/export.py wrote (model.hpp), the file
// mapped and loaded (its configuration checked), one forward against PyTorch's output.
#include <cmath>
#include <cstdio>

#include "model.hpp"  // using Model = ct::DecoderOnlyBlock<...>;  (written by tools/export.py --header)

static Model::Params params;
static Model::Workspace<1, 6> ws;
static ct::Tensor<float, 1, 6, Model::D> x, y, want;

int main(int, char** argv) {
    ct::mapped_file file;
    ct::safetensors::file<64> index;
    ct::status st = file.open(argv[1]);                     // model.safetensors
    if (st) st = index.parse(file.bytes());
    if (st) st = ct::load_state_dict(params, index);      // names, shapes and configuration checked
    if (!st) return std::printf("%s: %s\n", ct::to_string(st.code), std::string(st.tensor_name()).c_str()), 1;

    ct::mapped_file io;                                    // PyTorch's input and output (the test's)
    ct::safetensors::file<4> io_index;
    if (!io.open(argv[2]) || !io_index.parse(io.bytes()) || !ct::read_tensor(io_index, "x", x) ||
        !ct::read_tensor(io_index, "y", want))
        return 2;
    if (!Model::forward(params, ws, x, y, ct::causal{})) return 3;
    double worst = 0;
    for (std::size_t i = 0; i < y.size; ++i) worst = std::fmax(worst, std::fabs(y.storage[i] - want.storage[i]));
    std::printf("max |ctformer - PyTorch| = %.3g\n", worst);
    return worst <= 2e-5 ? 0 : 4;
}
