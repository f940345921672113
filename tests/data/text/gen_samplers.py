#!/usr/bin/env python3
"""Sampler fixtures (tests/data/text/samplers.json): the next-token distribution after the sampling
chain, computed in PyTorch with Hugging Face's LogitsProcessor / LogitsWarper formulas
(RepetitionPenalty, Temperature, TopK, TopP, MinP; written out here: transformers is not a Debian
package), OpenAI's frequency and presence penalties and a logit bias, for tests/test_text.cpp.
Usage: /usr/bin/python3 tests/data/text/gen_samplers.py"""
import json
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
V = 40


def chain(logits, o, recent):
    s = logits.clone()
    for tid, b in o.get("bias", []):
        s[tid] += b
    window = recent[-o.get("penalty_last_n", 64):] if o.get("penalty_last_n", 64) else []
    if window:
        ids = torch.tensor(window)
        rp = o.get("repetition_penalty", 1.0)
        score = torch.gather(s, 0, ids)  # RepetitionPenaltyLogitsProcessor
        score = torch.where(score < 0, score * rp, score / rp)
        s = s.scatter(0, ids, score)
        counts = torch.bincount(ids, minlength=V).to(s.dtype)  # OpenAI / llama.cpp penalties
        s = s - counts * o.get("frequency_penalty", 0.0) - (counts > 0).to(s.dtype) * o.get("presence_penalty", 0.0)
    t = o.get("temperature", 1.0)
    if t <= 0:
        p = torch.zeros(V, dtype=torch.float64)
        p[int(torch.argmax(s))] = 1
        return p
    s = s / t  # TemperatureLogitsWarper
    k = o.get("top_k", 0)
    if 0 < k < V:  # TopKLogitsWarper
        s = s.masked_fill(s < torch.topk(s, k)[0][-1], -float("inf"))
    tp = o.get("top_p", 1.0)
    if tp < 1.0:  # TopPLogitsWarper
        sl, si = torch.sort(s, descending=False)
        cum = sl.softmax(-1).cumsum(-1)
        remove = cum <= (1 - tp)
        remove[-1:] = False
        s = s.masked_fill(remove.scatter(0, si, remove), -float("inf"))
    mp = o.get("min_p", 0.0)
    if mp > 0:  # MinPLogitsWarper
        probs = torch.softmax(s, -1)
        remove = probs < mp * probs.max()
        si = torch.argsort(s, descending=True)
        sr = torch.gather(remove, 0, si)
        sr[:1] = False
        s = s.masked_fill(sr.scatter(0, si, sr), -float("inf"))
    return torch.softmax(s.double(), -1)


def main():
    g = torch.Generator().manual_seed(58)
    options = [
        {}, {"temperature": 0.7}, {"temperature": 0}, {"top_k": 5}, {"top_p": 0.6}, {"min_p": 0.05},
        {"min_p": 0.3, "temperature": 1.5}, {"repetition_penalty": 1.3}, {"repetition_penalty": 0.8},
        {"frequency_penalty": 0.5, "presence_penalty": 0.25}, {"repetition_penalty": 1.2, "penalty_last_n": 3},
        {"bias": [[3, 2.5], [7, -float("inf")]]}, {"bias": [[0, -1.0]], "repetition_penalty": 1.1, "top_k": 10, "top_p": 0.9,
                                                     "min_p": 0.02, "temperature": 0.8, "frequency_penalty": 0.1},
        {"repetition_penalty": 1.5, "temperature": 0},
    ]
    cases = []
    for o in options:
        for _ in range(3):
            logits = (torch.randn(V, generator=g) * 3).float()
            recent = torch.randint(0, V, (8,), generator=g).tolist()
            p = chain(logits, o, recent)
            oo = dict(o)
            if "bias" in oo:
                oo["bias"] = [[i, b if b != -float("inf") else "-inf"] for i, b in oo["bias"]]
            cases.append({"logits": logits.tolist(), "options": oo, "recent": recent, "probs": p.tolist()})
    with open(os.path.join(HERE, "samplers.json"), "w") as f:
        json.dump(cases, f)
    print("%d cases" % len(cases))


if __name__ == "__main__":
    main()
