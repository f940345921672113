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
