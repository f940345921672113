#!/usr/bin/env python3
"""Writes a stories15M-shaped Llama (random weights) in Hugging Face's LlamaForCausalLM names, with
PyTorch's 16 greedy tokens after examples/llama_generate.cpp's prompt, for that example to load and
check against. The model's math is tests/data/gen.py's (Hugging Face's, in plain torch).

Usage: make_llama_weights.py OUT.safetensors [--gqa]   (Debian's python3-torch)
"""
import os, sys
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data"))
import gen  # noqa: E402

out, gqa = sys.argv[1], "--gqa" in sys.argv
torch.manual_seed(0)
m = gen.Llama(32000, 288, 6, 2 if gqa else 6, 768, 6, 1e-5, 10000.0, torch.float32, False, "rotate_half",
              torch.nn.functional.silu)
seq = torch.tensor([[1, 450, 4123, 338]])
with torch.no_grad():
    for p in m.parameters():  # larger than nn.Linear's init, so the greedy tokens are well separated
        p.mul_(4.0) if p.dim() == 2 else None
    for _ in range(16):
        seq = torch.cat([seq, m(seq)[0, -1].argmax().view(1, 1)], 1)
expected = ",".join(str(int(x)) for x in seq[0, 4:])
gen.save_safetensors(out, dict(m.state_dict()), {"kind": "llama", "expected_tokens": expected,
                                                  "torch_version": torch.__version__})
print(out, "greedy:", seq[0, 4:].tolist())
