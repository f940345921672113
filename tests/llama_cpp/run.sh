#!/usr/bin/env bash
# ctformer against llama.cpp on the same GGUF files (the gguf_agreement test): write_agreement.py
# writes one Llama in F32 and llama.cpp quantizes it (F16, BF16, Q8_0, Q4_0, Q4_K_M, Q5_K_M, Q6_K);
# llama.cpp decodes 8 prompts greedily on each (agree.mjs); gguf_agreement loads each file with
# ct::load_gguf and compares (tests/llama_cpp/agree.cpp says what passes). write_agreement.py also
# checks tools/gguf_write.py's quantizers and files against llama.cpp's, byte for byte.
# Usage: run.sh SOURCE_DIR NODE_MODULES OUT_DIR GGUF_AGREEMENT_BINARY [PROMPTS]
set -euo pipefail
src="$1" node_modules="$2" out="$3" bin="$4"
mkdir -p "$out"
/usr/bin/python3 "$src/benchmarks/llama_cpp/write_agreement.py" "$node_modules" "$out" >"$out/quantize.log" 2>&1 ||
  { tail -20 "$out/quantize.log"; exit 1; }
# tools/export.py's safetensors of two of them: gguf_agreement checks they hold what ct::load_gguf reads
for f in agree_q4_k_m agree_q6_k; do /usr/bin/python3 "$src/tools/export.py" "$out/$f.gguf" "$out/$f.safetensors" >/dev/null; done
# (agree_ct_*: tools/gguf_write.py's Q4_K_M file of the same model, and its values dequantized into F32)
files=(agree.gguf agree_f16.gguf agree_bf16.gguf agree_q8_0.gguf agree_q4_0.gguf agree_q4_0_pure.gguf agree_q4_k_m.gguf agree_q5_k_m.gguf agree_q6_k.gguf
       agree_ct_q4_k_m.gguf agree_ct_q4_k_m_f32.gguf)
LLAMA_NODE_PATH="$node_modules" node "$src/benchmarks/llama_cpp/agree.mjs" "$out" "$out/llama_cpp.txt" "${files[@]}"
"$bin" "$out" "$out/llama_cpp.txt" ${5:-}
