#!/usr/bin/python3
"""Writes tests/data/training_trajectory.json: a small language model trained by PyTorch 1.13.

The training regression fixture: a decoder-only transformer (tapegrad's nn::LanguageModel: token
embedding, learned positions, pre-norm GELU blocks run causally, a final LayerNorm, a Linear head)
trained for a dozen steps in float64 with AdamW, gradient-norm clipping and a warm-up + cosine
schedule, on a copy task whose batches are in the file. It holds the initial parameters under
tapegrad's state_dict names, the batches, every step's loss, gradient norm (before clipping) and
learning rate, the loss of a held-out batch after training, and the final parameters.
tests/test_training_regression.cpp trains the same model from the same start and compares: a change
anywhere in the forward, backward, clipping, optimiser or schedule shows up as a different
trajectory.

Run with the interpreter that has torch:  /usr/bin/python3 tests/torch_reference/make_training.py
"""

import json
import math
import os

import torch
import torch.nn.functional as F

from make_reference import DTYPE, encode, randomise_parameters, transformer_layer_state

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_PATH = os.path.join(HERE, "..", "data", "training_trajectory.json")

CONFIG = {"vocab_size": 11, "max_len": 8, "d_model": 16, "num_heads": 2, "ff_hidden": 32, "num_layers": 2,
          "layer_norm_eps": 1e-5, "batch_size": 4, "steps": 12, "lr": 3e-3, "betas": [0.9, 0.95], "eps": 1e-8,
          "weight_decay": 0.1, "max_grad_norm": 1.0, "warmup_steps": 3, "min_lr_ratio": 0.1}


class LanguageModel(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["d_model"]
        self.tok_emb = torch.nn.Embedding(c["vocab_size"], d)
        self.pos_emb = torch.nn.Parameter(torch.zeros(c["max_len"], d))
        self.blocks = torch.nn.ModuleList(
            [torch.nn.TransformerEncoderLayer(d, c["num_heads"], c["ff_hidden"], dropout=0.0, activation="gelu",
                                              layer_norm_eps=c["layer_norm_eps"], batch_first=True, norm_first=True)
             for _ in range(c["num_layers"])])
        self.norm = torch.nn.LayerNorm(d, eps=c["layer_norm_eps"])
        self.head = torch.nn.Linear(d, c["vocab_size"])

    def forward(self, tokens):  # tokens: (B, T) -> logits (B, T, V)
        t = tokens.shape[1]
        h = self.tok_emb(tokens) + self.pos_emb[:t]
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)  # true = may not attend
        for block in self.blocks:
            h = block(h, src_mask=causal)
        return self.head(self.norm(h))

    def state(self):
        """tapegrad names -> parameters."""
        out = {"tok_emb.weight": self.tok_emb.weight, "pos_emb.weight": self.pos_emb}
        for i, block in enumerate(self.blocks):
            for name, p in transformer_layer_state(block, decoder=False)(False).items():
                out[f"blocks.{i}.{name}"] = p
        out.update({"norm.weight": self.norm.weight, "norm.bias": self.norm.bias, "head.weight": self.head.weight,
                    "head.bias": self.head.bias})
        return out


def copy_batch(generator, c):
    """(B, max_len + 1) tokens: four random tokens, then the same four, then their first (inputs are
    the first max_len, targets the last max_len): the second half is predictable from the first."""
    half = c["max_len"] // 2
    first = torch.randint(1, c["vocab_size"], (c["batch_size"], half), generator=generator)
    return torch.cat([first, first, first[:, :1]], dim=1)


def multiplier(step, c):
    """tapegrad's optim::cosine_with_warmup(warmup, steps, min_ratio) at a step."""
    warmup, total, low = c["warmup_steps"], c["steps"], c["min_lr_ratio"]
    if step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / (total - warmup))
    return low + (1 - low) * (1 + math.cos(math.pi * progress)) / 2


def loss_of(model, batch):
    logits = model(batch[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))


def main():
    torch.set_default_dtype(DTYPE)
    torch.manual_seed(0)
    c = CONFIG
    model = LanguageModel(c)
    randomise_parameters(model)
    initial = {name: encode(p) for name, p in model.state().items()}
    data = torch.Generator().manual_seed(1)
    batches = [copy_batch(data, c) for _ in range(c["steps"])]
    held_out = copy_batch(data, c)

    opt = torch.optim.AdamW(model.parameters(), lr=c["lr"], betas=tuple(c["betas"]), eps=c["eps"],
                            weight_decay=c["weight_decay"])
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: multiplier(step, c))
    losses, grad_norms, lrs = [], [], []
    for batch in batches:
        opt.zero_grad()
        loss = loss_of(model, batch)
        loss.backward()
        grad_norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), c["max_grad_norm"])))
        losses.append(loss.item())
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        schedule.step()
    with torch.no_grad():
        held_out_loss = loss_of(model, held_out).item()

    fixture = {
        "generator": "tests/torch_reference/make_training.py",
        "torch_version": torch.__version__,
        "dtype": "float64",
        "config": c,
        "initial_parameters": initial,
        "batches": [encode(b) for b in batches],
        "held_out_batch": encode(held_out),
        "losses": losses,
        "grad_norms": grad_norms,
        "learning_rates": lrs,
        "held_out_loss": held_out_loss,
        "final_parameters": {name: encode(p) for name, p in model.state().items()},
    }
    text = json.dumps(fixture, separators=(",", ":"))
    with open(OUT_PATH, "w") as f:
        f.write(text)
        f.write("\n")
    print(f"wrote {os.path.normpath(OUT_PATH)}: losses {losses[0]:.4f} .. {losses[-1]:.4f}, held out "
          f"{held_out_loss:.4f}, {len(text) / 1024:.1f} KB")


if __name__ == "__main__":
    main()
