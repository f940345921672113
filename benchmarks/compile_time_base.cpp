// One base-shape layer (D512 H8 F2048, B1 T128 S128) forward in one translation unit: its compile
// time is reported in docs/performance.md (scripts/bench_report).
#include <ctformer/ctformer.hpp>

using Layer = ct::DecoderLayer<ct::d_model<512>, ct::heads<8>>;
static Layer::Params params;
static Layer::Workspace<1, 128, 128> ws;
static ct::Tensor<float, 1, 128, 512> tgt, out;
static ct::Tensor<float, 1, 128, 512> memory;

void run_base_layer() { Layer::forward(params, ws, tgt, memory, out, ct::causal{}); }
