#!/usr/bin/env python3
"""Exports models the way users build them: transformers' and torch's defaults (SDPA attention),
`torch.onnx.export(..., dynamo=True)` with symbolic batch and sequence dims. Writes, per model,
NAME.onnx, its reference input(s) NAME.in.<input>.npy and PyTorch's output NAME.out.npy (fp32,
TF32 off), into OUT_DIR. Exports are cached: a model whose .onnx exists is skipped.

    python3 benches/models/export_users.py OUT_DIR [NAME ...]

Models: gpt2 (GPT2Model, 4 layers, d 256, 4 heads, vocab 1000, reference input batch 2 x seq 128),
bert (BertModel, 4 layers, d 256), mlp (physics MLP 64 -> 256 x4 -> 1, batch 2), mamba2
(Mamba2Model, 4 layers, d 256, state 64, 8 heads of 64, chunk 64; traced at batch 2 x seq 256),
recurrentgemma (RecurrentGemmaModel, 3 layers — recurrent, recurrent, attention — d 256, lru width
256; its time loop unrolled at export, so only the batch is symbolic; sequence RG_SEQ, default 256).
"""
import os
import sys
import time

import numpy as np
import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.manual_seed(0)
SEQ, VOCAB, D, LAYERS = 128, 1000, 256, 4
# The example batch of the export and of the reference inputs: 2, since torch.export specializes
# a dim of size 1 to the constant 1 (an export traced at batch 1 declares batch-1 intermediates and
# runs at no other batch).
BATCH = 2


class LastHidden(torch.nn.Module):
    """A transformers model returning only its last hidden state (one ONNX output)."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, input_ids):
        return self.inner(input_ids).last_hidden_state


class LastHiddenMasked(LastHidden):
    """The same for models that take an attention mask."""

    def forward(self, input_ids, attention_mask):
        return self.inner(input_ids, attention_mask=attention_mask).last_hidden_state


def gpt2():
    from transformers import GPT2Config, GPT2Model
    cfg = GPT2Config(vocab_size=VOCAB, n_positions=1024, n_embd=D, n_layer=LAYERS, n_head=4, use_cache=False)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    return LastHidden(GPT2Model(cfg).eval()), {"input_ids": ids}, {"input_ids": {0: "batch", 1: "seq"}}


def bert():
    from transformers import BertConfig, BertModel
    cfg = BertConfig(vocab_size=VOCAB, hidden_size=D, num_hidden_layers=LAYERS, num_attention_heads=4,
                     intermediate_size=4 * D, max_position_embeddings=512)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    mask = torch.ones(BATCH, SEQ, dtype=torch.int64)
    dyn = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    return LastHiddenMasked(BertModel(cfg, add_pooling_layer=False).eval()), {"input_ids": ids, "attention_mask": mask}, dyn


def mlp():
    layers, width = [], 64
    for _ in range(4):
        layers += [torch.nn.Linear(width, 256), torch.nn.ReLU()]
        width = 256
    layers.append(torch.nn.Linear(width, 1))
    return torch.nn.Sequential(*layers).eval(), {"x": torch.randn(BATCH, 64)}, {"x": {0: "batch"}}


# Mamba2's export is traced at this sequence length: transformers pads the sequence to whole
# 64-long chunks only when it is no multiple of 64, and the export keeps the branch it traced, so
# an export traced at 256 runs at every multiple of 64 (16 needs its own export).
MAMBA2_SEQ = 256


def mamba2():
    from transformers import Mamba2Config, Mamba2Model
    cfg = Mamba2Config(vocab_size=VOCAB, hidden_size=D, num_hidden_layers=LAYERS, state_size=64, num_heads=8,
                       head_dim=64, n_groups=1, expand=2, chunk_size=64, use_cache=False)
    ids = torch.randint(0, VOCAB, (BATCH, MAMBA2_SEQ))
    return LastHidden(Mamba2Model(cfg).eval()), {"input_ids": ids}, {"input_ids": {0: "batch", 1: "seq"}}


# RecurrentGemma's RG-LRU runs a Python loop over time, which the export unrolls: the sequence is
# fixed at export (RG_SEQ, default 256; the export takes ~60 s there), the batch stays symbolic.
RG_SEQ = int(os.environ.get("RG_SEQ", "256"))
# Exports the ONNX optimizer is left off for: on RecurrentGemma's unrolled loop it runs for more
# than 30 minutes at sequence 256 (ferrofuse folds what it would have folded).
UNOPTIMIZED = set()


def recurrentgemma():
    from transformers import RecurrentGemmaConfig, RecurrentGemmaModel
    cfg = RecurrentGemmaConfig(vocab_size=VOCAB, hidden_size=D, intermediate_size=3 * D, num_hidden_layers=3,
                               num_attention_heads=4, lru_width=D, attention_window_size=2048, use_cache=False)
    ids = torch.randint(0, VOCAB, (BATCH, RG_SEQ))
    return LastHidden(RecurrentGemmaModel(cfg).eval()), {"input_ids": ids}, {"input_ids": {0: "batch"}}


MODELS = {"gpt2": gpt2, "bert": bert, "mlp": mlp, "mamba2": mamba2, "recurrentgemma": recurrentgemma}


def build(name):
    """The module of model `name` (weights seeded per model: the same whatever else was built)."""
    torch.manual_seed(0)
    return MODELS[name]()[0]


def export(name, out_dir):
    path = os.path.join(out_dir, f"{name}.onnx")
    if os.path.exists(path):
        print(f"{name}: cached ({path})")
        return
    torch.manual_seed(0)
    model, inputs, dyn = MODELS[name]()
    model.eval()
    start = time.time()
    with torch.no_grad():
        want = model(*inputs.values())
        dynamic_shapes = tuple({k: torch.export.Dim.AUTO for k in d} for d in dyn.values())
        prog = torch.onnx.export(model, tuple(inputs.values()), input_names=list(inputs), dynamo=True,
                                 dynamic_shapes=dynamic_shapes, optimize=name not in UNOPTIMIZED)
    prog.save(path)
    import onnx
    m = onnx.load(path, load_external_data=False)
    for k, v in inputs.items():
        np.save(os.path.join(out_dir, f"{name}.in.{k}.npy"), v.numpy())
    np.save(os.path.join(out_dir, f"{name}.out.npy"), want.numpy())
    dims = [[d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim] for vi in m.graph.input]
    print(f"{name}: exported in {time.time() - start:.1f} s, {len(m.graph.node)} nodes, inputs {dims}")


if __name__ == "__main__":
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    for name in sys.argv[2:] or list(MODELS):
        export(name, out_dir)
