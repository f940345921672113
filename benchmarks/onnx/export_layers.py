#!/usr/bin/env python3
"""Exports the benchmark layers (benchmarks/shapes.hpp) to ONNX for the ONNX Runtime peer.

For each shape: <shape>.onnx (static shapes, batch-first, the causal mask baked in as a constant,
eval mode), <shape>.in.bin (tgt, then memory, float32) and <shape>.out.bin (PyTorch's output), so
the runner can check ONNX Runtime's numbers before timing it; and identity.onnx per input shape to
measure the per-call overhead of the path (net times subtract it).
Usage: /usr/bin/python3 export_layers.py OUT_DIR   (Debian's python3-torch and python3-onnx)"""
import os, sys
import torch

# name, B, T, S, D, H, F, cross (decoder layer with cross-attention) or decoder-only pre-norm GELU
SHAPES = [("tiny", 1, 16, 16, 64, 4, 256, True), ("small", 1, 32, 32, 128, 4, 512, True),
          ("base", 1, 128, 128, 512, 8, 2048, True), ("batched", 8, 32, 32, 128, 4, 512, True),
          ("gpt", 1, 64, 64, 256, 4, 1024, False)]


class Decoder(torch.nn.Module):
    def __init__(self, T, D, H, F):
        super().__init__()
        self.layer = torch.nn.TransformerDecoderLayer(D, H, F, dropout=0.0, batch_first=True)
        self.register_buffer("mask", torch.triu(torch.full((T, T), float("-inf")), diagonal=1))

    def forward(self, tgt, memory):
        return self.layer(tgt, memory, tgt_mask=self.mask)


class Block(torch.nn.Module):
    def __init__(self, T, D, H, F):
        super().__init__()
        self.layer = torch.nn.TransformerEncoderLayer(D, H, F, dropout=0.0, activation="gelu", batch_first=True,
                                                      norm_first=True)
        self.register_buffer("mask", torch.triu(torch.full((T, T), float("-inf")), diagonal=1))

    def forward(self, tgt):
        return self.layer(tgt, src_mask=self.mask)


class Identity(torch.nn.Module):  # the same inputs in, tgt's shape out: the path's per-call overhead
    def forward(self, tgt, memory=None):
        return tgt + 0 if memory is None else tgt + memory[:, :1, :1] * 0


def main(out):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    for name, B, T, S, D, H, F, cross in SHAPES:
        m = (Decoder(T, D, H, F) if cross else Block(T, D, H, F)).eval()
        tgt = torch.randn(B, T, D)
        args = (tgt, torch.randn(B, S, D)) if cross else (tgt,)
        names = ["tgt", "memory"] if cross else ["tgt"]
        with torch.no_grad():
            y = m(*args)
            torch.onnx.export(m, args, os.path.join(out, name + ".onnx"), input_names=names, output_names=["out"],
                              opset_version=17, do_constant_folding=True)
            torch.onnx.export(Identity(), args, os.path.join(out, name + ".identity.onnx"), input_names=names,
                              output_names=["out"], opset_version=17)
        with open(os.path.join(out, name + ".in.bin"), "wb") as f:
            for a in args:
                f.write(a.numpy().astype("float32").tobytes())
        with open(os.path.join(out, name + ".out.bin"), "wb") as f:
            f.write(y.numpy().astype("float32").tobytes())
        print(name, tuple(y.shape))


if __name__ == "__main__":
    main(sys.argv[1])
