// Written by tests/data/gen.py: the C++ aliases tools/export.py printed for the export_*.safetensors
// files (tests/test_export.cpp).
#pragma once
#include <ctformer/ctformer.hpp>

using ExportLayer = ct::DecoderLayer<ct::d_model<32>, ct::heads<4>, ct::ffn_dim<64>, ct::activation<ct::gelu>, ct::norm_first<true>, ct::layer_norm_eps<1, 1000000>>;
using ExportStack = ct::DecoderStack<ct::DecoderLayer<ct::d_model<16>, ct::heads<2>, ct::ffn_dim<32>>, 2>;
using ExportGPT = ct::GPT<13, 8, 2, ct::DecoderOnlyBlock<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::activation<ct::gelu>, ct::norm_first<true>>>;
using ExportLlama = ct::Llama<37, 32, 2, ct::d_model<32>, ct::heads<4>, ct::kv_heads<2>, ct::ffn_dim<48>, ct::norm_eps<1, 100000>, ct::tied_embeddings<true>>;
using ExportLlamaInt4 = ct::Llama<37, 32, 2, ct::d_model<32>, ct::heads<4>, ct::kv_heads<2>, ct::ffn_dim<48>, ct::weights<ct::int4_group<16>>, ct::norm_eps<1, 100000>, ct::tied_embeddings<true>>;
using ExportLlamaInt6 = ct::Llama<37, 32, 2, ct::d_model<32>, ct::heads<4>, ct::kv_heads<2>, ct::ffn_dim<48>, ct::weights<ct::int6_group<16>>, ct::norm_eps<1, 100000>, ct::tied_embeddings<true>>;
using ExportLlamaInt8Half = ct::Llama<37, 32, 2, ct::d_model<32>, ct::heads<4>, ct::kv_heads<2>, ct::ffn_dim<48>, ct::weights<ct::int8_group<16, ct::f16>>, ct::norm_eps<1, 100000>, ct::tied_embeddings<true>>;
using ExportLayerInt8 = ct::DecoderLayer<ct::d_model<32>, ct::heads<4>, ct::ffn_dim<64>, ct::weights<ct::int8_per_channel>, ct::activation<ct::gelu>, ct::norm_first<true>, ct::layer_norm_eps<1, 1000000>>;
using ExportGPTBf16 = ct::GPT<13, 8, 2, ct::DecoderOnlyBlock<ct::d_model<16>, ct::heads<4>, ct::ffn_dim<32>, ct::weights<ct::bf16>, ct::activation<ct::gelu>, ct::norm_first<true>>>;
using ExportLlamaHF = ct::Llama<37, 32, 2, ct::d_model<32>, ct::heads<4>, ct::ffn_dim<48>>;
