#!/usr/bin/env python3
"""Weights between PyTorch and tapegrad, both ways (run by CTest with python3-torch).

  torch_interop.py export DIR   PyTorch builds an nn.Transformer and a small LSTM language model,
                                writes their state dicts and a batch of inputs with PyTorch's
                                outputs as safetensors files (torch_*.safetensors) for tapegrad to load.
  torch_interop.py check DIR    loads the weights tapegrad trained and saved under PyTorch's names
                                (tapegrad_*.safetensors) into the same PyTorch modules and checks
                                that PyTorch's outputs equal the ones tapegrad computed.

The safetensors Python package is not in Debian: this file carries its own reader and writer.
"""
import json
import struct
import sys
from pathlib import Path

import torch
from torch import nn

DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64", torch.bool: "BOOL"}
TORCH_DTYPES = {name: dtype for dtype, name in DTYPES.items()}

# The models' sizes: tests/test_torch_interop.cpp builds the same ones.
D_MODEL, NHEAD, FEEDFORWARD, ENCODER_LAYERS, DECODER_LAYERS = 16, 4, 32, 2, 2
VOCAB, EMBED, HIDDEN, LSTM_LAYERS = 11, 8, 12, 2
TOLERANCE = 1e-5  # float32 rounding over a few layers; outputs are of order 1


def write_safetensors(path, tensors):
    header, chunks, offset = {}, [], 0
    for name, tensor in tensors.items():
        data = tensor.detach().contiguous().cpu().numpy().tobytes()
        header[name] = {"dtype": DTYPES[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    Path(path).write_bytes(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def read_safetensors(path):
    blob = Path(path).read_bytes()
    (length,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + length])
    data = blob[8 + length:]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        dtype = TORCH_DTYPES[entry["dtype"]]
        flat = torch.frombuffer(bytearray(data[begin:end]), dtype=dtype) if end > begin else torch.empty(0, dtype=dtype)
        tensors[name] = flat.reshape(entry["shape"])
    return tensors


class LstmLanguageModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, EMBED)
        self.lstm = nn.LSTM(EMBED, HIDDEN, num_layers=LSTM_LAYERS, batch_first=True)
        self.head = nn.Linear(HIDDEN, VOCAB)

    def forward(self, tokens):
        output, _ = self.lstm(self.embedding(tokens))
        return self.head(output)


def make_transformer():
    return nn.Transformer(d_model=D_MODEL, nhead=NHEAD, num_encoder_layers=ENCODER_LAYERS,
                          num_decoder_layers=DECODER_LAYERS, dim_feedforward=FEEDFORWARD, dropout=0.0,
                          batch_first=True)


def run_transformer(model, io):
    # Gradients stay on (the default), so PyTorch takes its reference path rather than the inference
    # fast path, which zeroes padded positions of the encoder's output.
    src, tgt, pad = io["src"], io["tgt"], io["src_key_padding_mask"]
    tgt_mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
    return model(src, tgt, tgt_mask=tgt_mask, src_key_padding_mask=pad, memory_key_padding_mask=pad)


def export(out):
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    transformer = make_transformer().eval()
    src, tgt = torch.randn(2, 5, D_MODEL), torch.randn(2, 4, D_MODEL)
    pad = torch.zeros(2, 5, dtype=torch.bool)
    pad[1, 3:] = True
    io = {"src": src, "tgt": tgt, "src_key_padding_mask": pad}
    io["output"] = run_transformer(transformer, io)
    write_safetensors(out / "torch_transformer.safetensors", transformer.state_dict())
    write_safetensors(out / "torch_transformer_io.safetensors", io)

    lm = LstmLanguageModel().eval()
    tokens = torch.randint(0, VOCAB, (3, 7))
    write_safetensors(out / "torch_lstm.safetensors", lm.state_dict())
    write_safetensors(out / "torch_lstm_io.safetensors", {"tokens": tokens, "logits": lm(tokens)})
    print(f"export: wrote the PyTorch models and outputs to {out}")


def compare(what, got, expected):
    if got.shape != expected.shape:
        sys.exit(f"{what}: PyTorch gives shape {tuple(got.shape)}, tapegrad {tuple(expected.shape)}")
    diff = (got - expected).abs().max().item()
    print(f"{what}: largest difference between PyTorch and tapegrad {diff:.3g} (scale {expected.abs().max().item():.3g})")
    if not diff <= TOLERANCE:
        sys.exit(f"{what}: PyTorch's output differs from tapegrad's by {diff:.3g} > {TOLERANCE}")


def load_strict(model, path):
    state = read_safetensors(path)
    result = model.load_state_dict(state, strict=True)
    if result.missing_keys or result.unexpected_keys:
        sys.exit(f"{path}: missing {result.missing_keys}, unexpected {result.unexpected_keys}")


def check(directory):
    transformer = make_transformer().eval()
    load_strict(transformer, directory / "tapegrad_transformer.safetensors")
    io = read_safetensors(directory / "tapegrad_transformer_io.safetensors")
    initial = read_safetensors(directory / "torch_transformer.safetensors")
    changed = sum(not torch.equal(initial[k], v) for k, v in transformer.state_dict().items())
    if changed == 0:
        sys.exit("tapegrad_transformer.safetensors holds PyTorch's initial weights: tapegrad did not train")
    compare("nn.Transformer", run_transformer(transformer, io).detach(), io["output"])

    lm = LstmLanguageModel().eval()
    load_strict(lm, directory / "tapegrad_lstm.safetensors")
    io = read_safetensors(directory / "tapegrad_lstm_io.safetensors")
    compare("LSTM language model", lm(io["tokens"]).detach(), io["logits"])
    print(f"check: PyTorch reproduces tapegrad's outputs with tapegrad's weights ({changed} trained entries)")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("export", "check"):
        sys.exit("usage: torch_interop.py export|check DIR")
    (export if sys.argv[1] == "export" else check)(Path(sys.argv[2]))
