#!/usr/bin/env python3
"""Exports the PyTorch reference models for the end-to-end tests (tests/pytorch_models.rs):
a GPT-2-style and a BERT-style model from transformers with random weights, a small CNN, and two
small Mamba2 models (transformers' reference chunked SSD, exported with symbolic batch and
sequence as users export them: `mamba2`, two layers, sequence 64 in chunks of 16; `mamba2_pad`,
two groups of B / C, sequence 40, padded to whole chunks), a small RecurrentGemma (its RG-LRU loop
unrolled, partial rotary embedding) and a small Llama-style decoder (rotary embedding, grouped-query
attention, symbolic batch and sequence).

For each model it writes NAME.onnx (torch.onnx.export, dynamo=True), the inputs as
NAME.in.<input name>.npy and PyTorch's outputs as NAME.out.<index>.npy, plus manifest.json with the
versions used. Everything goes into one tar.gz (the GPU machine returns at most 8 files a call).

Needs torch and transformers (it runs on the GPU machine, which has them; no GPU is used):
    python3 scripts/export_pytorch_fixtures.py OUT.tar.gz [NAME ...]
then, here: tar -xzf OUT.tar.gz -C tests/fixtures/pytorch (with NAMEs, only those models are
exported and the tar's manifest lists only them: merge it into the checked-in one).
"""
import io
import json
import os
import sys
import tarfile
import tempfile

import numpy as np
import torch
import transformers
from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel

torch.manual_seed(0)
np.random.seed(0)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.b1 = torch.nn.BatchNorm2d(16)
        self.c2 = torch.nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.b2 = torch.nn.BatchNorm2d(32)
        self.fc = torch.nn.Linear(32, 10)

    def forward(self, x):
        x = torch.relu(self.b1(self.c1(x)))
        x = torch.nn.functional.max_pool2d(x, 2)
        x = torch.relu(self.b2(self.c2(x)))
        x = torch.nn.functional.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


class Gpt2Logits(torch.nn.Module):
    """Positional inputs and plain tensor outputs (no KV cache objects) for torch.export."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, use_cache=False).logits


class BertOutputs(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, token_type_ids):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        return out.last_hidden_state, out.pooler_output


def gpt2():
    cfg = GPT2Config(vocab_size=1000, n_positions=64, n_embd=64, n_layer=2, n_head=4, use_cache=False,
                     attn_implementation="eager")
    model = Gpt2Logits(GPT2LMHeadModel(cfg).eval()).eval()
    ids = torch.randint(0, 1000, (1, 16), dtype=torch.int64)
    return "gpt2", model, {"input_ids": ids}


def bert():
    cfg = BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=128, max_position_embeddings=64, attn_implementation="eager")
    model = BertOutputs(BertModel(cfg).eval()).eval()
    ids = torch.randint(0, 1000, (2, 12), dtype=torch.int64)
    mask = torch.ones(2, 12, dtype=torch.int64)
    mask[1, 9:] = 0
    types = torch.zeros(2, 12, dtype=torch.int64)
    types[:, 6:] = 1
    return "bert", model, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def cnn():
    model = SmallCNN().eval()
    # Non-trivial batch-norm statistics, so that folding or skipping them would show.
    with torch.no_grad():
        for bn in (model.b1, model.b2):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.2, 0.2)
    return "cnn", model, {"x": torch.randn(2, 3, 32, 32)}


class LastHidden(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids).last_hidden_state


def mamba2_model(layers, groups, seq):
    from transformers import Mamba2Config, Mamba2Model
    torch.manual_seed(0)  # the same weights whichever models are exported with it
    cfg = Mamba2Config(vocab_size=64, hidden_size=32, num_hidden_layers=layers, state_size=8, num_heads=4,
                       head_dim=16, n_groups=groups, expand=2, chunk_size=16, use_cache=False)
    model = LastHidden(Mamba2Model(cfg).eval()).eval()
    # Exported with symbolic batch and sequence, as users export it (benches/models/export_users.py).
    return model, {"input_ids": torch.randint(0, 64, (2, seq), dtype=torch.int64)}, {"input_ids": {0: "batch", 1: "seq"}}


def mamba2():
    return ("mamba2", *mamba2_model(2, 1, 64))


def mamba2_pad():
    return ("mamba2_pad", *mamba2_model(1, 2, 40))


def recurrentgemma():
    # Three layers (recurrent, recurrent, attention): the RG-LRU loop unrolled at export (only the
    # batch symbolic), and the attention layer's partial rotary embedding spelled out
    # (rotate_half: Slice, Neg, Concat) over half of each head.
    from transformers import RecurrentGemmaConfig, RecurrentGemmaModel
    torch.manual_seed(0)
    cfg = RecurrentGemmaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                               num_attention_heads=2, lru_width=32, attention_window_size=64, use_cache=False)
    model = LastHidden(RecurrentGemmaModel(cfg).eval()).eval()
    ids = torch.randint(0, 64, (2, 12), dtype=torch.int64)
    return "recurrentgemma", model, {"input_ids": ids}, {"input_ids": {0: "batch"}}


def llama():
    # Llama-style decoder (grouped-query SDPA attention, rotary embedding over whole heads, SwiGLU),
    # symbolic batch and sequence.
    from transformers import LlamaConfig, LlamaModel
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, use_cache=False)
    model = LastHidden(LlamaModel(cfg).eval()).eval()
    ids = torch.randint(0, 64, (2, 10), dtype=torch.int64)
    return "llama", model, {"input_ids": ids}, {"input_ids": {0: "batch", 1: "seq"}}


def flatten(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    res = []
    for o in out:
        if isinstance(o, torch.Tensor):
            res.append(o)
    return res


def main(dest, names):
    files = {}
    manifest = {"torch": torch.__version__, "transformers": transformers.__version__, "models": {}}
    tmp = tempfile.mkdtemp()
    makers = {"gpt2": gpt2, "bert": bert, "cnn": cnn, "mamba2": mamba2, "mamba2_pad": mamba2_pad,
              "recurrentgemma": recurrentgemma, "llama": llama}
    for key in names or list(makers):
        made = makers[key]()
        name, model, inputs = made[:3]
        dynamic = made[3] if len(made) > 3 else None
        args = tuple(inputs.values())
        with torch.no_grad():
            outs = flatten(model(*args))
        path = os.path.join(tmp, name + ".onnx")
        shapes = None if dynamic is None else tuple(
            {k: torch.export.Dim.AUTO for k in d} for d in dynamic.values())
        prog = torch.onnx.export(model, args, input_names=list(inputs), dynamo=True, dynamic_shapes=shapes)
        prog.save(path)
        files[name + ".onnx"] = open(path, "rb").read()
        for k, v in inputs.items():
            buf = io.BytesIO(); np.save(buf, v.numpy()); files[f"{name}.in.{k}.npy"] = buf.getvalue()
        for i, o in enumerate(outs):
            buf = io.BytesIO(); np.save(buf, o.numpy()); files[f"{name}.out.{i}.npy"] = buf.getvalue()
        manifest["models"][name] = {"inputs": {k: list(v.shape) for k, v in inputs.items()},
                                    "outputs": [list(o.shape) for o in outs],
                                    "onnx_bytes": len(files[name + ".onnx"])}
        print(name, "ok", manifest["models"][name])
    files["manifest.json"] = json.dumps(manifest, indent=1).encode()
    with tarfile.open(dest, "w:gz") as tar:
        for n, data in sorted(files.items()):
            info = tarfile.TarInfo(n); info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    print("wrote", dest, sum(len(d) for d in files.values()), "bytes")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
