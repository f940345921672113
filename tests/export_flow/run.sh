#!/usr/bin/env bash
# README's "From PyTorch" flow end to end: a PyTorch module saved with torch.save, exported with
# tools/export.py (file + C++ alias), the alias compiled into a program that loads the file and
# matches PyTorch's output. Skipped (exit 77) where python3-torch is absent.
#   run.sh SRC_DIR WORK_DIR CXX FLAGS...
set -euo pipefail
src=$1 work=$2 cxx=$3
shift 3
if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
  echo "skipped: python3-torch is not installed (apt-get install python3-torch)"
  exit 77
fi
mkdir -p "$work"
cd "$work"
/usr/bin/python3 - "$src" <<'PY'
import sys, torch
sys.path.insert(0, sys.argv[1] + "/tests/data")
import gen
torch.manual_seed(7)
block = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation="gelu", batch_first=True, norm_first=True)
block.eval()
torch.save(block, "model.pt")
x = torch.randn(1, 6, 32)
gen.save_safetensors("io.safetensors", {"x": x, "y": block(x, src_mask=gen.causal(6))}, {})
PY
/usr/bin/python3 "$src/tools/export.py" model.pt model.safetensors --header model.hpp
"$cxx" -std=c++20 -O1 "$@" -I. -I"$src/include" "$src/tests/export_flow/main.cpp" -o flow
./flow model.safetensors io.safetensors
# A Hugging Face directory with a tokenizer: the exported file carries the tokenizer's tables too
# (tools/export.py; load_state_dict ignores them, load_tokenizer reads them: tests/test_text.cpp)
/usr/bin/python3 - "$src" <<'PY'
import json, os, shutil, struct, sys, torch
src = sys.argv[1]
sys.path.insert(0, src + "/tools")
import export
d = "hf_with_tokenizer"
os.makedirs(d, exist_ok=True)
torch.manual_seed(3)
sd = {"model.embed_tokens.weight": torch.randn(600, 16), "model.norm.weight": torch.ones(16), "lm_head.weight": torch.randn(600, 16)}
for i in range(1):
    p = "model.layers.%d." % i
    for n, shape in (("self_attn.q_proj", (16, 16)), ("self_attn.k_proj", (16, 16)), ("self_attn.v_proj", (16, 16)),
                     ("self_attn.o_proj", (16, 16)), ("mlp.gate_proj", (24, 16)), ("mlp.up_proj", (24, 16)),
                     ("mlp.down_proj", (16, 24))):
        sd[p + n + ".weight"] = torch.randn(*shape) * 0.1
    sd[p + "input_layernorm.weight"] = torch.ones(16)
    sd[p + "post_attention_layernorm.weight"] = torch.ones(16)
export.save_safetensors(os.path.join(d, "model.safetensors"), sd, {"format": "pt"})
with open(os.path.join(d, "config.json"), "w") as f:
    json.dump({"architectures": ["LlamaForCausalLM"], "hidden_size": 16, "num_attention_heads": 2, "num_key_value_heads": 2,
               "intermediate_size": 24, "rms_norm_eps": 1e-6, "num_hidden_layers": 1, "vocab_size": 600,
               "max_position_embeddings": 32, "hidden_act": "silu", "rope_theta": 10000.0}, f)
shutil.copy(src + "/tests/data/text/sp_bpe_identity.model", os.path.join(d, "tokenizer.model"))
export.export(export._HFLlama(d), "llama_with_tokenizer.safetensors")
data = open("llama_with_tokenizer.safetensors", "rb").read()
header = json.loads(data[8:8 + struct.unpack("<Q", data[:8])[0]])
assert "tokenizer.bytes" in header and "model.embed_tokens.weight" in header, sorted(header)[:5]
assert header["__metadata__"]["tokenizer.kind"] == "sentencepiece_bpe" and header["__metadata__"]["tokenizer.vocab"] == "600"
print("a Hugging Face directory's tokenizer is in the exported file")
PY
