#!/usr/bin/env python3
"""Arena size of ferrofuse's memory plan vs PyTorch's allocator peak, same model and input.

For a GPT-2-style, a BERT-style and a Mamba2-style model from transformers (random weights, eager
attention), it exports ONNX (torch.onnx.export, dynamo=True, static shapes), runs
`ferrofuse inspect MODEL --memory` and measures PyTorch's CUDA allocator during one no-grad forward
on the GPU: peak bytes allocated above what weights and inputs hold before the call
(torch.cuda.max_memory_allocated after reset_peak_memory_stats). PyTorch's figure includes the
outputs, which ferrofuse keeps outside the arena, so the table shows arena + outputs beside it.

    python3 scripts/memory_vs_pytorch.py path/to/ferrofuse OUT.json
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import torch
import transformers
from transformers import (BertConfig, BertModel, GPT2Config, GPT2LMHeadModel, Mamba2Config,
                          Mamba2Model)

torch.manual_seed(0)
SEQ, D, LAYERS, VOCAB = 128, 256, 4, 1000


class Gpt2(torch.nn.Module):
    def __init__(self):
        super().__init__()
        cfg = GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=D, n_layer=LAYERS, n_head=4,
                         use_cache=False, attn_implementation="eager")
        self.m = GPT2LMHeadModel(cfg).eval()

    def forward(self, ids):
        return self.m(input_ids=ids, use_cache=False).logits


class Bert(torch.nn.Module):
    def __init__(self):
        super().__init__()
        cfg = BertConfig(vocab_size=VOCAB, hidden_size=D, num_hidden_layers=LAYERS, num_attention_heads=4,
                         intermediate_size=4 * D, max_position_embeddings=SEQ, attn_implementation="eager")
        self.m = BertModel(cfg).eval()

    def forward(self, ids, mask):
        return self.m(input_ids=ids, attention_mask=mask).last_hidden_state


class Mamba2(torch.nn.Module):
    def __init__(self):
        super().__init__()
        cfg = Mamba2Config(vocab_size=VOCAB, hidden_size=D, num_hidden_layers=LAYERS, state_size=64,
                           expand=2, head_dim=32, num_heads=2 * D // 32, n_groups=1, chunk_size=64,
                           use_cache=False)
        self.m = Mamba2Model(cfg).eval()

    def forward(self, ids):
        return self.m(input_ids=ids, use_cache=False).last_hidden_state


def models():
    ids = torch.randint(0, VOCAB, (1, SEQ))
    mask = torch.ones(1, SEQ, dtype=torch.int64)
    yield "gpt2 (4L, d256, seq128)", Gpt2(), (ids,)
    yield "bert (4L, d256, seq128)", Bert(), (ids, mask)
    yield "mamba2 (4L, d256, seq128)", Mamba2(), (ids,)


def torch_peak(model, args):
    model = model.cuda()
    args = tuple(a.cuda() for a in args)
    with torch.no_grad():
        model(*args)  # warm-up: cuBLAS workspaces and caches are allocated here, not counted below
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        out = model(*args)
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
    out_bytes = out.numel() * out.element_size()
    model.cpu()
    return peak, out_bytes


def ferrofuse_memory(binary, path):
    text = subprocess.run([binary, "inspect", path, "--memory"], capture_output=True, text=True)
    if text.returncode != 0:
        return {"error": (text.stdout + text.stderr)[-2000:]}
    grab = lambda key: int(re.search(rf"{key}\s+(\d+) bytes", text.stdout).group(1))
    return {"arena": grab("arena"), "lower_bound": grab("lower bound"), "naive": grab("naive"),
            "in_place": int(re.search(r"in place\s+(\d+)", text.stdout).group(1))}


def main(binary, dest):
    rows = []
    tmp = tempfile.mkdtemp()
    for name, model, args in models():
        row = {"model": name}
        try:
            row["torch_peak"], row["output_bytes"] = torch_peak(model, args)
        except Exception as e:  # noqa: BLE001 - report and continue with the next model
            row["torch_error"] = repr(e)[-500:]
        path = os.path.join(tmp, name.split()[0] + ".onnx")
        try:
            with torch.no_grad():
                torch.onnx.export(model.cpu(), args, dynamo=True).save(path)
            row.update(ferrofuse_memory(binary, path))
        except Exception as e:  # noqa: BLE001
            row["export_error"] = repr(e)[-500:]
        rows.append(row)
        print(json.dumps(row), flush=True)
    meta = {"torch": torch.__version__, "transformers": transformers.__version__,
            "device": torch.cuda.get_device_name(0), "rows": rows}
    with open(dest, "w") as f:
        json.dump(meta, f, indent=1)
    print()
    print(f"{'model':<28}{'arena':>12}{'lower':>12}{'naive':>12}{'a/lower':>9}{'a/naive':>9}{'torch peak':>12}{'arena+out':>12}")
    for r in rows:
        if "arena" not in r:
            print(f"{r['model']:<28} {r.get('error') or r.get('export_error') or r.get('torch_error')}"[:300])
            continue
        out = r.get("output_bytes", 0)
        print(f"{r['model']:<28}{r['arena']:>12}{r['lower_bound']:>12}{r['naive']:>12}"
              f"{r['arena'] / max(r['lower_bound'], 1):>9.3f}{r['arena'] / max(r['naive'], 1):>9.3f}"
              f"{r.get('torch_peak', -1):>12}{r['arena'] + out:>12}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
