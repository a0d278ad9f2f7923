#!/usr/bin/python3
"""Writes tests/data/torch_reference.json: golden values and gradients from PyTorch 1.13.

Over 400 lines: one script writes every case of the one fixture file.

Every case is a small float64 computation with a tapegrad counterpart. For each case the file
holds the module's configuration, the inputs, every parameter under tapegrad's state_dict name,
the outputs, one fixed random "cotangent" per differentiable output, and the gradients of

    loss = sum over outputs o of sum(o * cotangent_o)

with respect to every floating-point input and every parameter. tests/test_torch_reference.cpp
rebuilds each case in tapegrad and compares.

Inputs, parameters and cotangents are rounded to 6 significant digits before use, so they are
written exactly in a few characters (the rounded double is what both sides compute with);
outputs and gradients are written in full (Python's repr, which round-trips every double).

Run with the interpreter that has torch:  /usr/bin/python3 tests/torch_reference/make_reference.py
"""

import json
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
DTYPE = torch.float64

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_PATH = os.path.join(HERE, "..", "data", "torch_reference.json")


# ---------------------------------------------------------------- helpers

def short(t):
    """t rounded to 6 significant digits (an exact double with a short repr)."""
    rounded = [float(f"{v:.6g}") for v in t.detach().reshape(-1).tolist()]
    return torch.tensor(rounded, dtype=DTYPE).reshape(t.shape)


def randn(*shape, scale=1.0):
    return short(torch.randn(tuple(shape), dtype=DTYPE) * scale)  # shape () for a scalar


def encode(t):
    """A tensor as {"shape", "data"} (row-major), with "dtype" unless float64."""
    t = t.detach()
    entry = {"shape": list(t.shape)}
    if t.dtype == torch.bool:
        entry["dtype"] = "bool"
        entry["data"] = [bool(v) for v in t.reshape(-1).tolist()]
    elif t.dtype == torch.int64:
        entry["dtype"] = "int64"
        entry["data"] = [int(v) for v in t.reshape(-1).tolist()]
    else:
        assert t.dtype == DTYPE, t.dtype
        data = t.reshape(-1).tolist()
        assert all(math.isfinite(v) for v in data), "non-finite value in the fixture"
        entry["data"] = data
    return entry


def randomise_parameters(module):
    """Gives every parameter short random values: weights around PyTorch's init scale, biases
    N(0, 0.2), LayerNorm weights 1 + N(0, 0.2) (so the affine part is exercised)."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.dim() >= 2:
                fan_in = p.shape[1]
                p.copy_(randn(*p.shape, scale=1.0 / math.sqrt(fan_in)))
            elif "norm" in name and name.endswith("weight"):
                p.copy_(short(1.0 + 0.2 * torch.randn(*p.shape, dtype=DTYPE)))
            else:
                p.copy_(randn(*p.shape, scale=0.2))


def mha_state(mha, prefix, cross):
    """tapegrad names -> tensors (values or, with grad=True, gradients) of a torch MultiheadAttention.

    tapegrad's MultiHeadAttention uses torch's names: in_proj_weight (rows [q; k; v], heads
    contiguous in each block) when kdim = vdim = embed_dim, self- or cross-attention, else
    q_proj_weight, k_proj_weight, v_proj_weight; then in_proj_bias and out_proj.weight / bias."""

    def get(grad):
        pick = (lambda p: p.grad) if grad else (lambda p: p)
        out = {}
        if mha._qkv_same_embed_dim:
            out[prefix + "in_proj_weight"] = pick(mha.in_proj_weight)
        else:
            assert cross, "kdim != embed_dim only maps to tapegrad's cross-attention"
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                out[prefix + name] = pick(getattr(mha, name))
        out[prefix + "in_proj_bias"] = pick(mha.in_proj_bias)
        out[prefix + "out_proj.weight"] = pick(mha.out_proj.weight)
        out[prefix + "out_proj.bias"] = pick(mha.out_proj.bias)
        return out

    return get


def transformer_layer_state(layer, decoder):
    """tapegrad names of torch.nn.TransformerEncoderLayer / TransformerDecoderLayer parameters."""
    self_attn = mha_state(layer.self_attn, "self_attn.", cross=False)
    cross_attn = mha_state(layer.multihead_attn, "cross_attn.", cross=True) if decoder else None
    norms = ["norm1", "norm2"] + (["norm3"] if decoder else [])

    def get(grad):
        pick = (lambda p: p.grad) if grad else (lambda p: p)
        out = dict(self_attn(grad))
        if cross_attn:
            out.update(cross_attn(grad))
        out["ff.fc1.weight"] = pick(layer.linear1.weight)
        out["ff.fc1.bias"] = pick(layer.linear1.bias)
        out["ff.fc2.weight"] = pick(layer.linear2.weight)
        out["ff.fc2.bias"] = pick(layer.linear2.bias)
        for n in norms:
            norm = getattr(layer, n)
            out[n + ".weight"] = pick(norm.weight)
            out[n + ".bias"] = pick(norm.bias)
        return out

    return get


def finish_case(module_kind, config, inputs, state, outputs, cotangents, extra_outputs=None):
    """Runs backward of sum(o * cotangent) and packs the case.

    inputs: name -> tensor (floating ones are leaves that require grad, unless listed in the
    case's "constant_inputs"); state: a function
    grad -> {tapegrad name: tensor}; outputs: name -> differentiable tensor."""
    loss = sum((outputs[name] * cotangents[name]).sum() for name in outputs)
    loss.backward()
    params = state(False)
    grads = state(True)
    assert set(params) == set(grads)
    case = {
        "module": module_kind,
        "config": config,
        "inputs": {name: encode(t) for name, t in inputs.items()},
        "params": {name: encode(t) for name, t in params.items()},
        "outputs": {name: encode(t) for name, t in outputs.items()},
        "cotangents": {name: encode(t) for name, t in cotangents.items()},
        "input_grads": {name: encode(t.grad) for name, t in inputs.items() if t.requires_grad},
        "param_grads": {name: encode(g) for name, g in grads.items()},
    }
    constants = [name for name, t in inputs.items() if t.is_floating_point() and not t.requires_grad]
    if constants:
        case["constant_inputs"] = constants  # floating-point inputs without a gradient (Huffman codes)
    for name, t in (extra_outputs or {}).items():
        case["outputs"][name] = encode(t)
    return case


def leaf(t):
    return t.detach().clone().requires_grad_(True)


def cotangent_like(t):
    return randn(*t.shape)


# ---------------------------------------------------------------- a. b. multi-head attention

def mha_case(seed, *, cross=False, kv_dim=None, is_causal=False, padding=False, need_weights=False,
             d_model=8, num_heads=2, batch=2, tq=5, tk=5):
    torch.manual_seed(seed)
    kdim = kv_dim if kv_dim is not None else d_model
    mha = torch.nn.MultiheadAttention(d_model, num_heads, bias=True, batch_first=True,
                                      kdim=kdim if cross else None, vdim=kdim if cross else None)
    mha.eval()  # dropout is 0 anyway; grad mode keeps torch off its inference fast path
    randomise_parameters(mha)
    query = leaf(randn(batch, tq, d_model))  # query: (B, Tq, d)
    inputs = {"query": query}
    if cross:
        key_value = leaf(randn(batch, tk, kdim))  # key_value: (B, Tk, kv_dim)
        inputs["key_value"] = key_value
    else:
        key_value = query
        tk = tq
    pad = None
    if padding:
        # Batch 0 sees every key; batch 1 has its last two keys padded (no row is fully masked).
        pad = torch.zeros(batch, tk, dtype=torch.bool)
        pad[1, tk - 2:] = True
        inputs["key_padding_mask"] = pad
    attn_mask = torch.triu(torch.ones(tq, tk, dtype=torch.bool), diagonal=1) if is_causal else None
    out, weights = mha(query, key_value, key_value, key_padding_mask=pad, attn_mask=attn_mask,
                       need_weights=need_weights, average_attn_weights=False)
    outputs = {"output": out}  # (B, Tq, d)
    if need_weights:
        outputs["weights"] = weights  # (B, H, Tq, Tk)
    cotangents = {name: cotangent_like(t) for name, t in outputs.items()}
    config = {"d_model": d_model, "num_heads": num_heads, "cross_attention": cross,
              "kv_dim": kdim if cross else 0, "is_causal": is_causal, "need_weights": need_weights}
    return finish_case("MultiHeadAttention", config, inputs, mha_state(mha, "", cross), outputs, cotangents)


def grouped_query_case(seed, *, num_kv_heads, is_causal=False, padding=False, need_weights=False,
                       d_model=8, num_heads=4, batch=2, t=5):
    """Self-attention with fewer key/value heads than query heads. PyTorch 1.13's MultiheadAttention
    has none, so the forward is written with its ops: query head h attends with key/value head
    h // (num_heads / num_kv_heads) (repeat_interleave over the head axis)."""
    torch.manual_seed(seed)
    head_dim = d_model // num_heads
    d_kv = num_kv_heads * head_dim
    group = num_heads // num_kv_heads
    in_proj_weight = leaf(randn(d_model + 2 * d_kv, d_model, scale=1.0 / math.sqrt(d_model)))
    in_proj_bias = leaf(randn(d_model + 2 * d_kv, scale=0.2))
    out_weight = leaf(randn(d_model, d_model, scale=1.0 / math.sqrt(d_model)))
    out_bias = leaf(randn(d_model, scale=0.2))
    x = leaf(randn(batch, t, d_model))  # x: (B, T, d)
    inputs = {"query": x}
    qkv = x @ in_proj_weight.T + in_proj_bias  # (B, T, d + 2 d_kv), rows [q; k; v]
    q, k, v = qkv.split([d_model, d_kv, d_kv], dim=-1)
    q = q.reshape(batch, t, num_heads, head_dim).transpose(1, 2)  # (B, H, T, hd)
    k = k.reshape(batch, t, num_kv_heads, head_dim).transpose(1, 2).repeat_interleave(group, dim=1)
    v = v.reshape(batch, t, num_kv_heads, head_dim).transpose(1, 2).repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(head_dim)  # (B, H, T, T)
    if is_causal:
        scores = scores.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1), float("-inf"))
    if padding:
        # Batch 1 has its last two keys padded (no row is fully masked).
        pad = torch.zeros(batch, t, dtype=torch.bool)
        pad[1, t - 2:] = True
        inputs["key_padding_mask"] = pad
        scores = scores.masked_fill(pad[:, None, None, :], float("-inf"))
    weights = scores.softmax(dim=-1)
    heads = (weights @ v).transpose(1, 2).reshape(batch, t, d_model)
    outputs = {"output": heads @ out_weight.T + out_bias}  # (B, T, d)
    if need_weights:
        outputs["weights"] = weights  # (B, H, T, T)
    cotangents = {name: cotangent_like(o) for name, o in outputs.items()}
    params = {"in_proj_weight": in_proj_weight, "in_proj_bias": in_proj_bias, "out_proj.weight": out_weight,
              "out_proj.bias": out_bias}

    def state(grad):
        return {name: (p.grad if grad else p) for name, p in params.items()}

    config = {"d_model": d_model, "num_heads": num_heads, "num_kv_heads": num_kv_heads, "cross_attention": False,
              "kv_dim": 0, "is_causal": is_causal, "need_weights": need_weights}
    return finish_case("MultiHeadAttention", config, inputs, state, outputs, cotangents)


def attention_function_case(seed, *, q_shape, k_shape, dv, scale=None, mask=None, mask_shape=None, is_causal=False,
                            bottom_right=False, need_weights=False):
    """scaled_dot_product_attention on its own: torch 1.13 has no F.scaled_dot_product_attention, so
    softmax(q k^T * scale + mask) v is written with its ops. mask: "bool" (true = may attend) or
    "float" (added to the scores; an input whose gradient is compared too)."""
    torch.manual_seed(seed)
    q = leaf(randn(*q_shape))  # q: (..., Tq, D)
    k = leaf(randn(*k_shape))  # k: (..., Tk, D)
    v = leaf(randn(*k_shape[:-1], dv))  # v: (..., Tk, Dv)
    tq, tk, d = q_shape[-2], k_shape[-2], q_shape[-1]
    inputs = {"q": q, "k": k, "v": v}
    scores = q @ k.transpose(-1, -2) * (scale if scale is not None else 1.0 / math.sqrt(d))  # (..., Tq, Tk)
    if mask == "bool":
        keep = torch.rand(*mask_shape) > 0.3
        keep[..., 0] = True  # no row fully masked
        inputs["attn_mask"] = keep
        scores = scores.masked_fill(~keep, float("-inf"))
    elif mask == "float":
        additive = leaf(randn(*mask_shape))
        inputs["attn_mask"] = additive
        scores = scores + additive
    if is_causal:
        shift = tk - tq if bottom_right else 0
        scores = scores.masked_fill(torch.triu(torch.ones(tq, tk, dtype=torch.bool), diagonal=1 + shift),
                                    float("-inf"))
    weights = scores.softmax(dim=-1)
    outputs = {"output": weights @ v}  # (..., Tq, Dv)
    if need_weights:
        outputs["weights"] = weights  # (..., Tq, Tk)
    cotangents = {name: cotangent_like(o) for name, o in outputs.items()}
    config = {"scale": scale, "is_causal": is_causal, "bottom_right": bottom_right, "need_weights": need_weights}
    return finish_case("scaled_dot_product_attention", config, inputs, lambda grad: {}, outputs, cotangents)


def einsum_case(seed, equation, *shapes):
    """torch.einsum itself: operands x0, x1, ... in order."""
    torch.manual_seed(seed)
    inputs = {f"x{i}": leaf(randn(*shape)) for i, shape in enumerate(shapes)}
    outputs = {"output": torch.einsum(equation, *inputs.values())}
    cotangents = {name: cotangent_like(o) for name, o in outputs.items()}
    return finish_case("einsum", {"equation": equation}, inputs, lambda grad: {}, outputs, cotangents)


def embedding_bag_case(seed, *, mode, weighted=False):
    """F.embedding_bag over 1-D indices with offsets: a bag with a repeated index and an empty bag."""
    torch.manual_seed(seed)
    weight = leaf(randn(6, 3))  # weight: (V, D)
    indices = torch.tensor([4, 1, 4, 0, 5, 2, 2], dtype=torch.int64)  # indices: (N)
    offsets = torch.tensor([0, 3, 3, 5], dtype=torch.int64)  # four bags, the second empty
    inputs = {"weight": weight, "indices": indices, "offsets": offsets}
    per_sample = None
    if weighted:
        per_sample = leaf(randn(indices.numel()))
        inputs["per_sample_weights"] = per_sample
    outputs = {"output": F.embedding_bag(indices, weight, offsets, mode=mode, per_sample_weights=per_sample)}  # (B, D)
    cotangents = {name: cotangent_like(o) for name, o in outputs.items()}
    return finish_case("embedding_bag", {"mode": mode}, inputs, lambda grad: {}, outputs, cotangents)


def mse_loss_case(seed, reduction):
    torch.manual_seed(seed)
    inputs = {"input": leaf(randn(2, 3, 2)), "target": leaf(randn(2, 3, 2))}
    outputs = {"output": F.mse_loss(inputs["input"], inputs["target"], reduction=reduction)}
    cotangents = {name: cotangent_like(o) for name, o in outputs.items()}
    return finish_case("mse_loss", {"reduction": reduction}, inputs, lambda grad: {}, outputs, cotangents)


# ---------------------------------------------------------------- c. transformer layers

def seeded_torch_layer(layer_class, seed, *, d_model, num_heads, ff_hidden, activation, norm_first):
    """A torch Transformer{Encoder,Decoder}Layer without dropout, in eval mode, parameters randomised."""
    torch.manual_seed(seed)
    layer = layer_class(d_model, num_heads, dim_feedforward=ff_hidden, dropout=0.0, activation=activation,
                        layer_norm_eps=1e-5, batch_first=True, norm_first=norm_first)
    layer.eval()
    randomise_parameters(layer)
    return layer


def layer_case(kind, layer, decoder, inputs, out, **config):
    """The case of one transformer layer's output, with the layer's config (eps added)."""
    return finish_case(kind, dict(config, eps=1e-5), inputs, transformer_layer_state(layer, decoder),
                       {"output": out}, {"output": cotangent_like(out)})


def encoder_layer_case(seed, *, norm_first, activation, padding=False, d_model=4, num_heads=2, ff_hidden=8,
                       batch=2, t=3):
    config = {"d_model": d_model, "num_heads": num_heads, "ff_hidden": ff_hidden, "activation": activation,
              "norm_first": norm_first}
    layer = seeded_torch_layer(torch.nn.TransformerEncoderLayer, seed, **config)
    x = leaf(randn(batch, t, d_model))  # x: (B, T, d)
    inputs = {"x": x}
    pad = None
    if padding:
        pad = torch.zeros(batch, t, dtype=torch.bool)
        pad[0, t - 1] = True
        inputs["key_padding_mask"] = pad
    out = layer(x, src_key_padding_mask=pad)
    return layer_case("TransformerEncoderLayer", layer, False, inputs, out, **config)


def decoder_layer_case(seed, *, norm_first, activation, memory_padding=False, d_model=4, num_heads=2, ff_hidden=8,
                       batch=2, t=3, s=4):
    config = {"d_model": d_model, "num_heads": num_heads, "ff_hidden": ff_hidden, "activation": activation,
              "norm_first": norm_first}
    layer = seeded_torch_layer(torch.nn.TransformerDecoderLayer, seed, **config)
    x = leaf(randn(batch, t, d_model))       # x: (B, T, d)
    memory = leaf(randn(batch, s, d_model))  # memory: (B, S, d)
    inputs = {"x": x, "memory": memory}
    causal = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)  # true = may not attend
    pad = None
    if memory_padding:
        pad = torch.zeros(batch, s, dtype=torch.bool)
        pad[1, s - 1] = True
        inputs["memory_key_padding_mask"] = pad
    out = layer(x, memory, tgt_mask=causal, memory_key_padding_mask=pad)
    return layer_case("TransformerDecoderLayer", layer, True, inputs, out, **config)


# ---------------------------------------------------------------- layer norm, feed-forward

def layer_norm_case(seed, dim=6, shape=(2, 3)):
    torch.manual_seed(seed)
    norm = torch.nn.LayerNorm(dim, eps=1e-5, elementwise_affine=True)
    with torch.no_grad():  # affine parameters away from (1, 0), so that their effect shows
        norm.weight.copy_(short(1.0 + 0.3 * torch.randn(dim, dtype=DTYPE)))
        norm.bias.copy_(randn(dim, scale=0.3))
    x = leaf(randn(*shape, dim) * 2.0 + 0.5)  # x: (2, 3, dim)
    out = norm(x)
    outputs = {"output": out}
    cotangents = {"output": cotangent_like(out)}
    state = lambda grad: {"weight": norm.weight.grad if grad else norm.weight,
                          "bias": norm.bias.grad if grad else norm.bias}
    return finish_case("LayerNorm", {"dim": dim, "eps": 1e-5}, {"x": x}, state, outputs, cotangents)


def feed_forward_case(seed, activation, d_model=4, hidden=6, shape=(2, 3)):
    torch.manual_seed(seed)
    fc1 = torch.nn.Linear(d_model, hidden)
    fc2 = torch.nn.Linear(hidden, d_model)
    pair = torch.nn.ModuleDict({"fc1": fc1, "fc2": fc2})
    randomise_parameters(pair)
    act = F.relu if activation == "relu" else F.gelu  # F.gelu: exact, with erf
    x = leaf(randn(*shape, d_model))  # x: (2, 3, d)
    out = fc2(act(fc1(x)))
    outputs = {"output": out}
    cotangents = {"output": cotangent_like(out)}

    def state(grad):
        pick = (lambda p: p.grad) if grad else (lambda p: p)
        return {"fc1.weight": pick(fc1.weight), "fc1.bias": pick(fc1.bias),
                "fc2.weight": pick(fc2.weight), "fc2.bias": pick(fc2.bias)}

    config = {"d_model": d_model, "hidden": hidden, "activation": activation}
    return finish_case("FeedForward", config, {"x": x}, state, outputs, cotangents)


# ---------------------------------------------------------------- e. mixture of experts

def moe_aux_losses(logits, top_ids, weights, num_experts):
    """The auxiliary losses of MoEOutput, of the logits the top k were taken of: load balancing
    E * sum_i f_i P_i (f_i the fraction of tokens whose top-1 expert is i, a constant; P_i the mean
    router probability), importance CV^2 (population variance / mean^2 of the summed combine
    weights), router z (mean logsumexp^2)."""
    n = logits.shape[0]
    top1_fraction = F.one_hot(top_ids[:, 0], num_experts).to(DTYPE).mean(0)  # f: (E), constant
    load_balancing = num_experts * (top1_fraction * F.softmax(logits, dim=-1).mean(0)).sum()
    gates = torch.zeros(n, num_experts, dtype=DTYPE).scatter_add(1, top_ids, weights)  # (N, E)
    importance = gates.sum(0)
    importance_loss = importance.var(unbiased=False) / importance.mean() ** 2
    router_z = torch.logsumexp(logits, dim=-1).pow(2).mean()
    return {"load_balancing_loss": load_balancing, "importance_loss": importance_loss, "router_z_loss": router_z}


def moe_state(routers, experts):
    """The state function of finish_case for a mixture of experts: routers maps tapegrad names
    ("router", "noise") to bias-free Linear modules."""
    def state(grad):
        pick = (lambda p: p.grad) if grad else (lambda p: p)
        s = {f"{name}.weight": pick(linear.weight) for name, linear in routers.items()}
        for i, e in enumerate(experts):
            for fc in ("fc1", "fc2"):
                s[f"experts.{i}.{fc}.weight"] = pick(e[fc].weight)
                s[f"experts.{i}.{fc}.bias"] = pick(e[fc].bias)
        return s
    return state


def moe_case(seed, *, weighting, activation, dim=4, num_experts=4, top_k=2, hidden=5, batch=2, t=4,
             min_gap=0.05):
    """tapegrad's MixtureOfExperts written out by hand with torch ops (W4's definition):
    router Linear(D, E) without bias, top-k of the router logits, weights = softmax over the k
    selected logits (softmax_topk) or the full softmax's probabilities at the selected experts
    renormalised (softmax_then_topk), experts Linear-act-Linear, out = sum_j w_j expert_j(x).
    Auxiliary losses: load balancing E * sum_i f_i P_i (f_i = fraction of tokens whose top-1
    expert is i, a constant; P_i = mean router probability), importance CV^2 (population
    variance / mean^2 of the summed combine weights), router z (mean logsumexp^2).

    Inputs are redrawn until, for every token, the top k + 1 logits are at least min_gap apart
    (rounding cannot change the routing) and every expert gets at least one token."""
    torch.manual_seed(seed)
    router = torch.nn.Linear(dim, num_experts, bias=False)
    experts = torch.nn.ModuleList(
        [torch.nn.ModuleDict({"fc1": torch.nn.Linear(dim, hidden), "fc2": torch.nn.Linear(hidden, dim)})
         for _ in range(num_experts)])
    randomise_parameters(router)
    randomise_parameters(experts)
    with torch.no_grad():
        router.weight.mul_(3.0)  # spread the logits so that clear gaps are easy to find
        router.weight.copy_(short(router.weight))
    act = F.relu if activation == "relu" else F.gelu
    for attempt in range(1000):
        x = randn(batch, t, dim)
        logits = F.linear(x.reshape(-1, dim), router.weight)
        ordered = logits.sort(dim=-1, descending=True).values[:, : top_k + 1]
        gaps = (ordered[:, :-1] - ordered[:, 1:]).min()
        chosen = logits.topk(top_k, dim=-1).indices
        if gaps > min_gap and len(torch.unique(chosen)) == num_experts:
            break
    else:
        raise RuntimeError("no input with clear routing found")
    x = leaf(x)  # x: (B, T, D)

    tokens = x.reshape(-1, dim)                        # tokens: (N, D)
    n = tokens.shape[0]
    logits = F.linear(tokens, router.weight)           # logits: (N, E)
    probs = F.softmax(logits, dim=-1)                  # probs: (N, E)
    top_scores, top_ids = torch.topk(logits, top_k, dim=-1)  # (N, k), sorted descending
    if weighting == "softmax_topk":
        weights = F.softmax(top_scores, dim=-1)        # weights: (N, k)
    else:
        picked = probs.gather(1, top_ids)
        weights = picked / picked.sum(-1, keepdim=True)
    # Every expert on every token (dense), then each token picks its k experts' rows: the
    # unpicked rows get no gradient, exactly as if they had not been computed.
    expert_out = torch.stack([e["fc2"](act(e["fc1"](tokens))) for e in experts])  # (E, N, D)
    rows = torch.arange(n)
    out = torch.zeros(n, dim, dtype=DTYPE)
    for j in range(top_k):
        out = out + weights[:, j:j + 1] * expert_out[top_ids[:, j], rows]
    out = out.reshape(x.shape)

    outputs = {"output": out, **moe_aux_losses(logits, top_ids, weights, num_experts)}
    cotangents = {"output": cotangent_like(out), "load_balancing_loss": short(torch.tensor(0.7)),
                  "importance_loss": short(torch.tensor(-0.4)), "router_z_loss": short(torch.tensor(0.3))}
    config = {"dim": dim, "num_experts": num_experts, "top_k": top_k, "hidden": hidden, "weighting": weighting,
              "activation": activation, "router_bias": False}
    return finish_case("MixtureOfExperts", config, {"x": x}, moe_state({"router": router}, experts), outputs,
                       cotangents, extra_outputs={"expert_indices": top_ids})


class TapegradGenerator:
    """tapegrad's Generator (autograd/generator.h), for the draws a case must share with it: the
    64-bit Mersenne Twister (std::mt19937_64's numbers) and Box-Muller normals, cosine first."""

    WORDS, SHIFT, MASK = 312, 156, (1 << 64) - 1

    def __init__(self, seed):
        self.words = [seed & self.MASK]
        for i in range(1, self.WORDS):
            prev = self.words[-1]
            self.words.append((6364136223846793005 * (prev ^ (prev >> 62)) + i) & self.MASK)
        self.position = self.WORDS
        self.spare = None

    def _twist(self):
        upper, lower = (self.MASK << 31) & self.MASK, (1 << 31) - 1
        w = self.words
        for i in range(self.WORDS):
            y = (w[i] & upper) | (w[(i + 1) % self.WORDS] & lower)
            w[i] = w[(i + self.SHIFT) % self.WORDS] ^ (y >> 1) ^ (0xB5026F5AA96619E9 if y & 1 else 0)
        self.position = 0

    def next_u64(self):
        if self.position >= self.WORDS:
            self._twist()
        x = self.words[self.position]
        self.position += 1
        x ^= (x >> 29) & 0x5555555555555555
        x ^= (x << 17) & 0x71D67FFFEDA60000
        x ^= (x << 37) & 0xFFF7EEE000000000
        return (x ^ (x >> 43)) & self.MASK

    def uniform(self):
        return (self.next_u64() >> 11) * 2.0 ** -53

    def normal(self):
        if self.spare is not None:
            value, self.spare = self.spare, None
            return value
        u1 = 1.0 - self.uniform()
        u2 = self.uniform()
        radius = math.sqrt(-2.0 * math.log(u1))
        angle = 2.0 * math.pi * u2
        self.spare = radius * math.sin(angle)
        return radius * math.cos(angle)

    def randn(self, *shape):
        return torch.tensor([self.normal() for _ in range(math.prod(shape))], dtype=DTYPE).reshape(shape)


def noisy_moe_case(seed, *, noise_seed, capacity_factor, dim=4, num_experts=4, top_k=2, hidden=5, batch=2, t=5,
                   noise_epsilon=0.01, min_gap=0.05):
    """Noisy top-k gating (Shazeer et al. 2017) as MoEOptions documents it, with torch ops, in
    training: H = x W_g + z * (softplus(x W_noise) + eps), z standard normals drawn as tapegrad's
    module draws them (its noise generator seeded with noise_seed, one normal per element of (N, E)
    in order); top k of H, softmax over the k; with a capacity ceil(cf * N * k / E), the (token,
    slot) pairs beyond it dropped, first slots first, tokens in order. The auxiliary losses are
    taken of H. The load loss: P_i = Phi((clean_i - threshold_i) / stddev_i), the threshold being
    the (k+1)-th largest noisy logit for experts in the top k and the k-th for the others; load =
    sum over tokens; loss = CV^2 (population variance / mean^2).

    Inputs are redrawn until the noisy top k + 1 are at least min_gap apart for every token."""
    torch.manual_seed(seed)
    router = torch.nn.Linear(dim, num_experts, bias=False)
    noise = torch.nn.Linear(dim, num_experts, bias=False)
    experts = torch.nn.ModuleList(
        [torch.nn.ModuleDict({"fc1": torch.nn.Linear(dim, hidden), "fc2": torch.nn.Linear(hidden, dim)})
         for _ in range(num_experts)])
    for m in (router, noise, experts):
        randomise_parameters(m)
    with torch.no_grad():
        router.weight.mul_(3.0)
        router.weight.copy_(short(router.weight))
    n = batch * t
    z = TapegradGenerator(noise_seed).randn(n, num_experts)  # the module's draws, (N, E)
    for attempt in range(1000):
        x = randn(batch, t, dim)
        tokens = x.reshape(-1, dim)
        noisy = F.linear(tokens, router.weight) + z * (F.softplus(F.linear(tokens, noise.weight)) + noise_epsilon)
        ordered = noisy.sort(dim=-1, descending=True).values[:, : top_k + 1]
        if (ordered[:, :-1] - ordered[:, 1:]).min() > min_gap:
            break
    else:
        raise RuntimeError("no input with clear routing found")
    x = leaf(x)  # x: (B, T, D)

    tokens = x.reshape(-1, dim)                        # (N, D)
    clean = F.linear(tokens, router.weight)            # (N, E)
    stddev = F.softplus(F.linear(tokens, noise.weight)) + noise_epsilon
    logits = clean + z * stddev                        # H: (N, E)
    top_scores, top_ids = torch.topk(logits, top_k, dim=-1)
    weights = F.softmax(top_scores, dim=-1)            # (N, k)
    capacity = math.ceil(capacity_factor * n * top_k / num_experts) if capacity_factor > 0 else n * top_k
    kept = torch.zeros(n, top_k, dtype=torch.bool)
    taken = [0] * num_experts
    for j in range(top_k):
        for i in range(n):
            e = int(top_ids[i, j])
            if taken[e] < capacity:
                taken[e] += 1
                kept[i, j] = True
    assert not bool(kept.all()) or capacity_factor == 0, "the capacity must bind"
    act = F.relu
    expert_out = torch.stack([e["fc2"](act(e["fc1"](tokens))) for e in experts])  # (E, N, D)
    rows = torch.arange(n)
    out = torch.zeros(n, dim, dtype=DTYPE)
    for j in range(top_k):
        out = out + torch.where(kept[:, j:j + 1], weights[:, j:j + 1] * expert_out[top_ids[:, j], rows], 0.0)
    out = out.reshape(x.shape)

    top = logits.topk(top_k + 1, dim=-1).values
    threshold_in, threshold_out = top[:, top_k:top_k + 1], top[:, top_k - 1:top_k]
    in_top = logits > threshold_in
    phi = lambda v: 0.5 * (1.0 + torch.erf(v / math.sqrt(2.0)))
    load = torch.where(in_top, phi((clean - threshold_in) / stddev), phi((clean - threshold_out) / stddev)).sum(0)
    load_loss = load.var(unbiased=False) / load.mean() ** 2

    outputs = {"output": out, **moe_aux_losses(logits, top_ids, weights, num_experts), "load_loss": load_loss}
    cotangents = {"output": cotangent_like(out), "load_balancing_loss": short(torch.tensor(0.7)),
                  "importance_loss": short(torch.tensor(-0.4)), "router_z_loss": short(torch.tensor(0.3)),
                  "load_loss": short(torch.tensor(0.9))}

    config = {"dim": dim, "num_experts": num_experts, "top_k": top_k, "hidden": hidden, "weighting": "softmax_topk",
              "activation": "relu", "router_bias": False, "noisy_gating": True, "noise_seed": noise_seed,
              "noise_epsilon": noise_epsilon, "capacity_factor": capacity_factor}
    return finish_case("MixtureOfExperts", config, {"x": x}, moe_state({"router": router, "noise": noise}, experts),
                       outputs, cotangents, extra_outputs={"expert_indices": top_ids, "noise": z})


# ---------------------------------------------------------------- g. positions, RMSNorm, latent attention
# PyTorch 1.13 has none of these: each is written with its ops from the formulas in tapegrad's
# headers (positions.h, layers.h, latent_attention.h).

def rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rotary(x, offset, base=10000.0):
    """Interleaved-pair RoPE: pair i of position t rotated by t * base^(-2i / Dh)."""
    t, dh = x.shape[-2], x.shape[-1]
    angle = torch.arange(offset, offset + t, dtype=DTYPE)[:, None] * base ** (-2.0 * torch.arange(dh // 2) / dh)
    cos, sin = angle.cos(), angle.sin()  # (T, Dh/2)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).reshape(x.shape)


def rms_norm_case(seed, dim=5, shape=(2, 3), eps=1e-6):
    torch.manual_seed(seed)
    weight = leaf(short(1.0 + 0.3 * torch.randn(dim, dtype=DTYPE)))
    x = leaf(randn(*shape, dim) * 2.0 + 0.5)  # x: (2, 3, dim)
    outputs = {"output": rms_norm(x, weight, eps)}
    cotangents = {name: cotangent_like(o) for name, o in outputs.items()}
    state = lambda grad: {"weight": weight.grad if grad else weight}
    return finish_case("RMSNorm", {"dim": dim, "eps": eps}, {"x": x}, state, outputs, cotangents)


def rotary_case(seed, *, shape, offset, max_len=16):
    torch.manual_seed(seed)
    x = leaf(randn(*shape))  # x: (..., T, Dh)
    outputs = {"output": rotary(x, offset)}
    cotangents = {name: cotangent_like(o) for name, o in outputs.items()}
    config = {"head_dim": shape[-1], "max_len": max_len, "offset": offset}
    return finish_case("RotaryEmbedding", config, {"x": x}, lambda grad: {}, outputs, cotangents)


def sinusoidal_case(seed, *, shape, offset, max_len=16, base=10000.0):
    """x + PE[offset : offset + T]; an odd dim ends in a sine without its cosine."""
    torch.manual_seed(seed)
    x = leaf(randn(*shape))  # x: (B, T, dim)
    t, dim = shape[-2], shape[-1]
    pos = torch.arange(offset, offset + t, dtype=DTYPE)[:, None]
    column = torch.arange(dim)
    angle = pos / base ** ((column - column % 2) / dim)  # (T, dim): pair i's 2i / dim in both columns
    table = torch.where(column % 2 == 0, angle.sin(), angle.cos())
    outputs = {"output": x + table}
    cotangents = {name: cotangent_like(o) for name, o in outputs.items()}
    config = {"dim": dim, "max_len": max_len, "offset": offset, "base": base}
    return finish_case("SinusoidalPositionalEncoding", config, {"x": x}, lambda grad: {}, outputs, cotangents)


def latent_attention_case(seed, *, q_lora_rank, absorb=False, prefix=0, d_model=6, num_heads=2, kv_lora_rank=4,
                          nope=3, rope=2, v_dim=3, batch=2, t=5, eps=1e-6):
    """Multi-head latent attention, naive form, causal over the whole sequence. tapegrad runs it
    naive, absorbed (absorb) or in two calls through its latent cache (the first `prefix`
    positions, then the rest): the same function each time."""
    torch.manual_seed(seed)
    h, qk = num_heads, nope + rope

    def weight(out_features, in_features):
        return leaf(randn(out_features, in_features, scale=1.0 / math.sqrt(in_features)))

    params = {}
    if q_lora_rank > 0:
        params["q_a_proj.weight"] = weight(q_lora_rank, d_model)
        params["q_a_layernorm.weight"] = leaf(short(1.0 + 0.3 * torch.randn(q_lora_rank, dtype=DTYPE)))
        params["q_b_proj.weight"] = weight(h * qk, q_lora_rank)
    else:
        params["q_proj.weight"] = weight(h * qk, d_model)
    params["kv_a_proj_with_mqa.weight"] = weight(kv_lora_rank + rope, d_model)
    params["kv_a_layernorm.weight"] = leaf(short(1.0 + 0.3 * torch.randn(kv_lora_rank, dtype=DTYPE)))
    params["kv_b_proj.weight"] = weight(h * (nope + v_dim), kv_lora_rank)
    params["o_proj.weight"] = weight(d_model, h * v_dim)
    x = leaf(randn(batch, t, d_model))  # x: (B, T, d_model)

    if q_lora_rank > 0:
        q = rms_norm(x @ params["q_a_proj.weight"].T, params["q_a_layernorm.weight"], eps) @ params["q_b_proj.weight"].T
    else:
        q = x @ params["q_proj.weight"].T
    q = q.reshape(batch, t, h, qk).transpose(1, 2)  # (B, H, T, nope + rope)
    q = torch.cat([q[..., :nope], rotary(q[..., nope:], 0)], dim=-1)
    kv_a = x @ params["kv_a_proj_with_mqa.weight"].T  # (B, T, r + rope)
    latent = rms_norm(kv_a[..., :kv_lora_rank], params["kv_a_layernorm.weight"], eps)
    k_rope = rotary(kv_a[..., kv_lora_rank:].unsqueeze(1), 0)  # (B, 1, T, rope), shared by the heads
    kv = (latent @ params["kv_b_proj.weight"].T).reshape(batch, t, h, nope + v_dim).transpose(1, 2)
    k = torch.cat([kv[..., :nope], k_rope.expand(batch, h, t, rope)], dim=-1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(qk)
    scores = scores.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1), float("-inf"))
    heads = (scores.softmax(-1) @ kv[..., nope:]).transpose(1, 2).reshape(batch, t, h * v_dim)
    outputs = {"output": heads @ params["o_proj.weight"].T}  # (B, T, d_model)
    cotangents = {name: cotangent_like(o) for name, o in outputs.items()}
    config = {"d_model": d_model, "num_heads": num_heads, "q_lora_rank": q_lora_rank, "kv_lora_rank": kv_lora_rank,
              "qk_nope_head_dim": nope, "qk_rope_head_dim": rope, "v_head_dim": v_dim, "max_len": 16,
              "norm_eps": eps, "absorb": absorb, "prefix": prefix}
    return finish_case("MultiHeadLatentAttention", config, {"x": x},
                       lambda grad: {name: (p.grad if grad else p) for name, p in params.items()}, outputs,
                       cotangents)


# ---------------------------------------------------------------- h. word2vec's losses, information measures, pointer sentinel

def reduce(per_example, reduction):
    return {"none": per_example, "sum": per_example.sum(), "mean": per_example.mean()}[reduction]


def negative_sampling_case(seed, reduction, batch=3, k=4, dim=5):
    """-log sigmoid(h . u_o) - sum_k log sigmoid(-h . u_k) per example."""
    torch.manual_seed(seed)
    inputs = {"hidden": leaf(randn(batch, dim)), "positive": leaf(randn(batch, dim)),
              "negatives": leaf(randn(batch, k, dim))}
    h = inputs["hidden"]
    per_example = -F.logsigmoid((h * inputs["positive"]).sum(-1)) - \
        F.logsigmoid(-(inputs["negatives"] @ h.unsqueeze(-1)).squeeze(-1)).sum(-1)
    outputs = {"output": reduce(per_example, reduction)}
    cotangents = {name: cotangent_like(o) for name, o in outputs.items()}
    return finish_case("negative_sampling_loss", {"reduction": reduction}, inputs, lambda grad: {}, outputs,
                       cotangents)


def hierarchical_softmax_case(seed, reduction, dim=4):
    """-sum over the path's nodes of log sigmoid((1 - 2 code) h . v): three paths of lengths 3, 1, 2
    padded to 3 (the mask), codes a constant input."""
    torch.manual_seed(seed)
    mask = torch.tensor([[True, True, True], [True, False, False], [True, True, False]])
    codes = torch.tensor([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    inputs = {"hidden": leaf(randn(3, dim)), "nodes": leaf(randn(3, 3, dim)), "codes": codes, "mask": mask}
    scores = (inputs["nodes"] @ inputs["hidden"].unsqueeze(-1)).squeeze(-1)  # (B, L)
    per_example = -(F.logsigmoid((1.0 - 2.0 * codes) * scores) * mask).sum(-1)
    outputs = {"output": reduce(per_example, reduction)}
    cotangents = {name: cotangent_like(o) for name, o in outputs.items()}
    return finish_case("hierarchical_softmax_loss", {"reduction": reduction}, inputs, lambda grad: {}, outputs,
                       cotangents)


def information_case(seed, measure, *, axis, log_base, shape=(2, 3, 4)):
    """entropy, cross_entropy_between and kl_divergence of probability vectors along axis."""
    torch.manual_seed(seed)
    p = leaf(short(torch.randn(*shape, dtype=DTYPE).softmax(axis)))
    q = leaf(short(torch.randn(*shape, dtype=DTYPE).softmax(axis)))
    inputs = {"p": p} if measure == "entropy" else {"p": p, "q": q}
    if measure == "entropy":
        value = -(p * p.log()).sum(axis)
    elif measure == "cross_entropy_between":
        value = -(p * q.log()).sum(axis)
    else:
        value = (p * (p.log() - q.log())).sum(axis)
    outputs = {"output": value / (math.log(log_base) if log_base else 1.0)}
    cotangents = {name: cotangent_like(o) for name, o in outputs.items()}
    config = {"measure": measure, "axis": axis, "log_base": log_base}
    return finish_case("information", config, inputs, lambda grad: {}, outputs, cotangents)


def pointer_sentinel_case(seed, *, d=4, vocab=6, window=3):
    """The pointer sentinel mixture in probability space (Merity et al.): a = softmax over the
    visible positions' scores and the sentinel's, p(y) = g p_vocab(y) + the pointer's weight on the
    positions holding y; tapegrad computes these in log space."""
    torch.manual_seed(seed)
    tokens = torch.tensor([[1, 3, 1, 4, 3], [2, 2, 5, 0, 2]])  # (B, T): repeats, so the pointer can copy
    targets = torch.tensor([[3, 1, 4, 3, 5], [2, 5, 0, 2, 1]])  # next tokens, some outside the window
    b, t = tokens.shape
    query_weight = leaf(randn(d, d, scale=1.0 / math.sqrt(d)))
    query_bias = leaf(randn(d, scale=0.2))
    sentinel = leaf(randn(d, scale=0.5))
    hidden = leaf(randn(b, t, d))
    logits = leaf(randn(b, t, vocab))
    q = torch.tanh(hidden @ query_weight.T + query_bias)
    scores = torch.cat([q @ hidden.transpose(1, 2), (q @ sentinel).unsqueeze(-1)], dim=-1) / math.sqrt(d)
    position = torch.arange(t)
    shown = (position[None, :] <= position[:, None]) & (position[None, :] > position[:, None] - window)
    shown = torch.cat([shown, torch.ones(t, 1, dtype=torch.bool)], dim=1)  # (T, T + 1), the sentinel always
    a = scores.masked_fill(~shown, float("-inf")).softmax(-1)  # (B, T, T + 1)
    gate = a[..., t]
    on_target = (tokens[:, None, :] == targets[:, :, None]).to(DTYPE)  # (B, T, T): position i holds y_t
    pointer = (a[..., :t] * on_target).sum(-1)
    p_vocab = logits.softmax(-1)
    outputs = {"log_probs": (gate * p_vocab.gather(2, targets.unsqueeze(-1)).squeeze(-1) + pointer).log(),
               "pointer_log_mass": (gate + pointer).log(),
               "log_distribution": (gate.unsqueeze(-1) * p_vocab + a[..., :t] @ F.one_hot(tokens, vocab).to(DTYPE))
               .log()}  # (B, T, V): the copies' weights added to each token they hold
    cotangents = {name: cotangent_like(o) for name, o in outputs.items()}
    params = {"query.weight": query_weight, "query.bias": query_bias, "sentinel": sentinel}
    return finish_case("PointerSentinel", {"d_model": d, "window": window},
                       {"hidden": hidden, "tokens": tokens, "logits": logits, "targets": targets},
                       lambda grad: {name: (p.grad if grad else p) for name, p in params.items()}, outputs,
                       cotangents, extra_outputs={"gate": gate, "pointer_probs": pointer})


# ---------------------------------------------------------------- main

# ---------------------------------------------------------------- f. recurrent layers and cells

RECURRENT = {
    "rnn_tanh": (torch.nn.RNN, torch.nn.RNNCell, {"nonlinearity": "tanh"}),
    "rnn_relu": (torch.nn.RNN, torch.nn.RNNCell, {"nonlinearity": "relu"}),
    "lstm": (torch.nn.LSTM, torch.nn.LSTMCell, {}),
    "gru": (torch.nn.GRU, torch.nn.GRUCell, {}),
}


def parameters_state(module):
    """tapegrad names -> tensors: the recurrent modules use torch's names unchanged."""
    params = dict(module.named_parameters())
    return lambda grad: {name: (p.grad if grad else p) for name, p in params.items()}


def recurrent_case(seed, cell, *, num_layers=2, bidirectional=False, batch_first=False, lengths=None,
                   initial_state=True, input_size=3, hidden=4, batch=3, t=5):
    """A multi-layer RNN / LSTM / GRU; with lengths, run on a packed sequence and padded back."""
    torch.manual_seed(seed)
    layer_class, _, extra = RECURRENT[cell]
    rnn = layer_class(input_size, hidden, num_layers=num_layers, bidirectional=bidirectional,
                      batch_first=batch_first, **extra)
    randomise_parameters(rnn)
    directions = 2 if bidirectional else 1
    x = leaf(randn(batch, t, input_size) if batch_first else randn(t, batch, input_size))
    inputs = {"x": x}
    state = None
    if initial_state:
        h0 = leaf(randn(num_layers * directions, batch, hidden, scale=0.5))
        inputs["h0"] = h0
        state = h0
        if cell == "lstm":
            c0 = leaf(randn(num_layers * directions, batch, hidden, scale=0.5))
            inputs["c0"] = c0
            state = (h0, c0)
    if lengths is not None:
        lens = torch.tensor(lengths, dtype=torch.int64)
        inputs["lengths"] = lens
        packed = torch.nn.utils.rnn.pack_padded_sequence(x, lens, batch_first=batch_first, enforce_sorted=False)
        out, final = rnn(packed, state)
        out, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=batch_first, total_length=t)
    else:
        out, final = rnn(x, state)
    outputs = {"output": out}
    if cell == "lstm":
        outputs["h_n"], outputs["c_n"] = final
    else:
        outputs["h_n"] = final
    cotangents = {name: cotangent_like(o) for name, o in outputs.items()}
    config = {"cell": cell, "input_size": input_size, "hidden": hidden, "num_layers": num_layers,
              "bidirectional": bidirectional, "batch_first": batch_first}
    return finish_case("Recurrent", config, inputs, parameters_state(rnn), outputs, cotangents)


def cell_case(seed, cell, *, input_size=3, hidden=4, batch=3):
    torch.manual_seed(seed)
    _, cell_class, extra = RECURRENT[cell]
    module = cell_class(input_size, hidden, **extra)
    randomise_parameters(module)
    x = leaf(randn(batch, input_size))
    h = leaf(randn(batch, hidden, scale=0.5))
    inputs = {"x": x, "h": h}
    if cell == "lstm":
        c = leaf(randn(batch, hidden, scale=0.5))
        inputs["c"] = c
        h1, c1 = module(x, (h, c))
        outputs = {"h": h1, "c": c1}
    else:
        outputs = {"h": module(x, h)}
    cotangents = {name: cotangent_like(o) for name, o in outputs.items()}
    config = {"cell": cell, "input_size": input_size, "hidden": hidden}
    return finish_case("RecurrentCell", config, inputs, parameters_state(module), outputs, cotangents)


# ---------------------------------------------------------------- convolutions, pools and windows

def conv_case(seed, dims, *, x_shape, w_shape, bias=True, stride=1, padding=0, dilation=1, groups=1):
    """F.conv1d / F.conv2d / F.conv3d: inputs x, weight and (optionally) bias."""
    torch.manual_seed(seed)
    inputs = {"x": leaf(randn(*x_shape)), "weight": leaf(randn(*w_shape))}
    if bias:
        inputs["bias"] = leaf(randn(w_shape[0]))
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[dims]
    outputs = {"output": conv(inputs["x"], inputs["weight"], inputs.get("bias"), stride=stride, padding=padding,
                              dilation=dilation, groups=groups)}
    cotangents = {name: cotangent_like(o) for name, o in outputs.items()}
    config = {"dims": dims, "stride": listed(stride), "padding": padding if isinstance(padding, str) else listed(padding),
              "dilation": listed(dilation), "groups": groups}
    return finish_case("conv", config, inputs, lambda grad: {}, outputs, cotangents)


def pad_case(seed, *, x_shape, pads, mode):
    """F.pad in a mode other than constant."""
    torch.manual_seed(seed)
    inputs = {"x": leaf(randn(*x_shape))}
    outputs = {"output": F.pad(inputs["x"], pads, mode=mode)}
    cotangents = {name: cotangent_like(o) for name, o in outputs.items()}
    return finish_case("pad", {"pads": list(pads), "mode": mode}, inputs, lambda grad: {}, outputs, cotangents)


def conv_transpose_case(seed, dims, *, x_shape, w_shape, bias=True, stride=1, padding=0, output_padding=0, groups=1,
                        dilation=1):
    """F.conv_transpose1d / 2d / 3d: inputs x, weight (in, out / groups, kernel...) and bias."""
    torch.manual_seed(seed)
    inputs = {"x": leaf(randn(*x_shape)), "weight": leaf(randn(*w_shape))}
    if bias:
        inputs["bias"] = leaf(randn(w_shape[1] * groups))
    conv = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[dims]
    outputs = {"output": conv(inputs["x"], inputs["weight"], inputs.get("bias"), stride=stride, padding=padding,
                              output_padding=output_padding, groups=groups, dilation=dilation)}
    cotangents = {name: cotangent_like(o) for name, o in outputs.items()}
    config = {"dims": dims, "stride": listed(stride), "padding": listed(padding),
              "output_padding": listed(output_padding), "dilation": listed(dilation), "groups": groups}
    return finish_case("conv_transpose", config, inputs, lambda grad: {}, outputs, cotangents)


def adaptive_pool_case(seed, kind, dims, *, x_shape, output_size):
    """F.adaptive_max_pool1d/2d/3d and F.adaptive_avg_pool1d/2d/3d."""
    torch.manual_seed(seed)
    inputs = {"x": leaf(randn(*x_shape))}
    pools = {("max", 1): F.adaptive_max_pool1d, ("max", 2): F.adaptive_max_pool2d, ("max", 3): F.adaptive_max_pool3d,
             ("avg", 1): F.adaptive_avg_pool1d, ("avg", 2): F.adaptive_avg_pool2d, ("avg", 3): F.adaptive_avg_pool3d}
    outputs = {"output": pools[(kind, dims)](inputs["x"], output_size)}
    cotangents = {name: cotangent_like(o) for name, o in outputs.items()}
    config = {"kind": kind, "dims": dims, "output_size": listed(output_size)}
    return finish_case("adaptive_pool", config, inputs, lambda grad: {}, outputs, cotangents)


def listed(v):
    return list(v) if isinstance(v, (tuple, list)) else [v]


def pool_case(seed, kind, dims, *, x_shape, kernel_size, stride=None, padding=0, dilation=1, count_include_pad=True,
              ceil_mode=False, norm_type=None):
    """F.max_pool1d/2d/3d, F.avg_pool1d/2d/3d and F.lp_pool1d/2d (stride None: the kernel size); lp_pool3d
    written as torch 2's (torch 1.13 has none), on positive inputs."""
    torch.manual_seed(seed)
    inputs = {"x": leaf(randn(*x_shape) if kind != "lp" else short(randn(*x_shape).abs() + 0.1))}
    if kind == "lp":
        if dims == 3:
            pooled = F.avg_pool3d(inputs["x"].pow(norm_type), kernel_size, stride=stride, ceil_mode=ceil_mode)
            window = math.prod(kernel_size) if isinstance(kernel_size, tuple) else kernel_size ** 3
            output = (torch.sign(pooled) * F.relu(pooled.abs())).mul(window).pow(1.0 / norm_type)
        else:
            pool = {1: F.lp_pool1d, 2: F.lp_pool2d}[dims]
            output = pool(inputs["x"], norm_type, kernel_size, stride=stride, ceil_mode=ceil_mode)
    elif kind == "max":
        pool = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[dims]
        output = pool(inputs["x"], kernel_size, stride=stride, padding=padding, dilation=dilation, ceil_mode=ceil_mode)
    else:
        pool = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[dims]
        output = pool(inputs["x"], kernel_size, stride=stride, padding=padding, count_include_pad=count_include_pad,
                      ceil_mode=ceil_mode)
    outputs = {"output": output}
    cotangents = {name: cotangent_like(o) for name, o in outputs.items()}
    config = {"kind": kind, "dims": dims, "kernel_size": listed(kernel_size),
              "stride": [] if stride is None else listed(stride), "padding": listed(padding),
              "dilation": listed(dilation), "count_include_pad": count_include_pad, "ceil_mode": ceil_mode,
              "norm_type": norm_type}
    return finish_case("pool", config, inputs, lambda grad: {}, outputs, cotangents)


def unfold_case(seed, *, x_shape, kernel_size, dilation=1, padding=0, stride=1, fold_to=None):
    """F.unfold, or F.fold into fold_to when given (then x holds the columns)."""
    torch.manual_seed(seed)
    inputs = {"x": leaf(randn(*x_shape))}
    if fold_to is None:
        output = F.unfold(inputs["x"], kernel_size, dilation=dilation, padding=padding, stride=stride)
    else:
        output = F.fold(inputs["x"], fold_to, kernel_size, dilation=dilation, padding=padding, stride=stride)
    outputs = {"output": output}
    cotangents = {name: cotangent_like(o) for name, o in outputs.items()}
    config = {"fold_to": None if fold_to is None else listed(fold_to), "kernel_size": listed(kernel_size),
              "dilation": listed(dilation), "padding": listed(padding), "stride": listed(stride)}
    return finish_case("unfold", config, inputs, lambda grad: {}, outputs, cotangents)


def batch_norm_case(seed, *, x_shape, training, momentum=0.1, eps=1e-5, affine=True):
    """F.batch_norm with running statistics (constant inputs; training updates copies of them, given as the
    extra outputs running_mean and running_var)."""
    torch.manual_seed(seed)
    channels = x_shape[1]
    inputs = {"x": leaf(randn(*x_shape)), "running_mean": randn(channels), "running_var": randn(channels).abs() + 0.5}
    if affine:
        inputs["weight"] = leaf(randn(channels))
        inputs["bias"] = leaf(randn(channels))
    running_mean, running_var = inputs["running_mean"].clone(), inputs["running_var"].clone()
    output = F.batch_norm(inputs["x"], running_mean, running_var, inputs.get("weight"), inputs.get("bias"),
                          training=training, momentum=momentum, eps=eps)
    outputs = {"output": output}
    cotangents = {name: cotangent_like(o) for name, o in outputs.items()}
    config = {"training": training, "momentum": momentum, "eps": eps}
    return finish_case("batch_norm", config, inputs, lambda grad: {}, outputs, cotangents,
                       extra_outputs={"running_mean": running_mean, "running_var": running_var})


def instance_norm_case(seed, *, x_shape, use_input_stats, running=True, momentum=0.1, eps=1e-5, affine=True):
    """F.instance_norm, with running statistics (constant inputs, updated in copies given as the extra
    outputs running_mean and running_var) or without."""
    torch.manual_seed(seed)
    channels = x_shape[1]
    inputs = {"x": leaf(randn(*x_shape))}
    if running:
        inputs["running_mean"] = randn(channels)
        inputs["running_var"] = randn(channels).abs() + 0.5
    if affine:
        inputs["weight"] = leaf(randn(channels))
        inputs["bias"] = leaf(randn(channels))
    running_mean = inputs["running_mean"].clone() if running else None
    running_var = inputs["running_var"].clone() if running else None
    output = F.instance_norm(inputs["x"], running_mean, running_var, inputs.get("weight"), inputs.get("bias"),
                             use_input_stats=use_input_stats, momentum=momentum, eps=eps)
    outputs = {"output": output}
    cotangents = {name: cotangent_like(o) for name, o in outputs.items()}
    config = {"use_input_stats": use_input_stats, "momentum": momentum, "eps": eps}
    extra = {"running_mean": running_mean, "running_var": running_var} if running else None
    return finish_case("instance_norm", config, inputs, lambda grad: {}, outputs, cotangents, extra_outputs=extra)


def group_norm_case(seed, *, x_shape, groups, affine=True, eps=1e-5):
    """F.group_norm: inputs x and (optionally) weight and bias."""
    torch.manual_seed(seed)
    channels = x_shape[1]
    inputs = {"x": leaf(randn(*x_shape))}
    if affine:
        inputs["weight"] = leaf(randn(channels))
        inputs["bias"] = leaf(randn(channels))
    outputs = {"output": F.group_norm(inputs["x"], groups, inputs.get("weight"), inputs.get("bias"), eps=eps)}
    cotangents = {name: cotangent_like(o) for name, o in outputs.items()}
    return finish_case("group_norm", {"groups": groups, "eps": eps}, inputs, lambda grad: {}, outputs, cotangents)


def resample_case(seed, kind, *, x_shape, size=None, scale_factor=None, mode="nearest", align_corners=None,
                  factor=None):
    """F.interpolate (kind "interpolate"), F.pixel_shuffle and F.pixel_unshuffle (factor)."""
    torch.manual_seed(seed)
    inputs = {"x": leaf(randn(*x_shape))}
    if kind == "interpolate":
        output = F.interpolate(inputs["x"], size=size, scale_factor=scale_factor, mode=mode,
                               align_corners=align_corners)
        config = {"kind": kind, "size": [] if size is None else listed(size),
                  "scale_factor": [] if scale_factor is None else listed(scale_factor), "mode": mode,
                  "align_corners": bool(align_corners)}
    else:
        output = (F.pixel_shuffle if kind == "pixel_shuffle" else F.pixel_unshuffle)(inputs["x"], factor)
        config = {"kind": kind, "factor": factor}
    outputs = {"output": output}
    cotangents = {name: cotangent_like(o) for name, o in outputs.items()}
    return finish_case("resample", config, inputs, lambda grad: {}, outputs, cotangents)


def activation_case(seed, name, *, x_shape, scale=3.0, **options):
    """One of the activations F.hardtanh, relu6, hardsigmoid, hardswish, logsigmoid, softsign, glu,
    softshrink, hardshrink, tanhshrink, threshold, softmin and prelu (its weight an input), on x = scale * standard normals (reaching past the kinks)."""
    torch.manual_seed(seed)
    inputs = {"x": leaf(randn(*x_shape) * scale)}
    tolerance = {"grad_rel_tol": options.pop("grad_rel_tol")} if "grad_rel_tol" in options else {}
    if name == "prelu":
        inputs["weight"] = leaf(randn(options.pop("channels")))
        output = F.prelu(inputs["x"], inputs["weight"])
    else:
        output = getattr(F, name)(inputs["x"], **options)
    outputs = {"output": output}
    cotangents = {n: cotangent_like(o) for n, o in outputs.items()}
    return finish_case("activation", dict(options, name=name, **tolerance), inputs, lambda grad: {}, outputs,
                       cotangents)


def loss_case(seed, name, **options):
    """One of torch's losses F.hinge_embedding_loss, multi_margin_loss, multilabel_margin_loss,
    multilabel_soft_margin_loss, poisson_nll_loss and gaussian_nll_loss on short random inputs (labels,
    class indices and weights constant inputs), with the options given."""
    torch.manual_seed(seed)
    reduction = options.get("reduction", "mean")
    config = dict(options, name=name, reduction=reduction)
    if name == "hinge_embedding_loss":
        inputs = {"input": leaf(randn(3, 4, scale=2.0)),
                  "target": torch.tensor([1.0, -1.0])[torch.randint(0, 2, (3, 4))]}
    elif name == "multi_margin_loss":
        shape = options.pop("shape")
        inputs = {"input": leaf(randn(*shape)),
                  "target": torch.randint(0, shape[-1], shape[:-1], dtype=torch.int64)}
        if options.pop("weighted", False):
            inputs["weight"] = short(torch.rand(shape[-1], dtype=DTYPE) + 0.5)
        config = dict(options, name=name, reduction=reduction, weighted="weight" in inputs)
    elif name == "multilabel_margin_loss":
        inputs = {"input": leaf(randn(4, 5)),
                  "target": torch.tensor([[3, 0, -1, 1, 2], [1, -1, -1, -1, -1], [0, 1, 2, 3, 4],
                                          [-1, 2, 2, 2, 2]])}
        if options.pop("unbatched", False):
            inputs = {"input": inputs["input"].detach()[0].clone().requires_grad_(True),
                      "target": torch.tensor([4, 2, 2, -1, 0])}
            config["unbatched"] = True
    elif name == "multilabel_soft_margin_loss":
        inputs = {"input": leaf(randn(3, 4, scale=2.0)), "target": leaf(short(torch.rand(3, 4, dtype=DTYPE)))}
        if options.pop("weighted", False):
            inputs["weight"] = short(torch.rand(4, dtype=DTYPE) + 0.5)
        config = dict(options, name=name, reduction=reduction, weighted="weight" in inputs)
    elif name == "poisson_nll_loss":
        rate = randn(3, 4) if options["log_input"] else short(torch.rand(3, 4, dtype=DTYPE) * 3.0 + 0.1)
        counts = short(torch.rand(3, 4, dtype=DTYPE) * 4.0)  # some at or below 1, where Stirling's term is 0
        inputs = {"input": leaf(rate), "target": leaf(counts)}
    elif name == "gaussian_nll_loss":
        var_shape = options.pop("var_shape")
        var = short(torch.rand(*var_shape, dtype=DTYPE) + 0.05)
        var.reshape(-1)[0] = 1e-8  # below eps: clamped, the gradient passing as the identity
        inputs = {"input": leaf(randn(3, 4)), "target": leaf(randn(3, 4)), "var": leaf(var)}
    else:
        raise ValueError(name)
    call = {k: v for k, v in options.items() if k != "reduction"}
    named = {k: v for k, v in inputs.items() if k not in ("input", "target")}
    if name == "gaussian_nll_loss":
        output = F.gaussian_nll_loss(inputs["input"], inputs["target"], inputs["var"], reduction=reduction, **call)
    else:
        output = getattr(F, name)(inputs["input"], inputs["target"], reduction=reduction, **named, **call)
    outputs = {"output": output}
    cotangents = {n: cotangent_like(o) for n, o in outputs.items()}
    return finish_case("loss", config, inputs, lambda grad: {}, outputs, cotangents)


def ctc_case(seed, *, frames, classes, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False, unbatched=False):
    """F.ctc_loss of log_softmax(logits) (the gradient compared is the logits', where torch's kernel
    and the loss's own gradient agree), targets padded (2-D) or concatenated (1-D)."""
    torch.manual_seed(seed)
    shape = (frames, classes) if unbatched else (frames, len(input_lengths), classes)
    inputs = {"logits": leaf(randn(*shape, scale=1.5)), "targets": torch.tensor(targets),
              "input_lengths": torch.tensor(input_lengths), "target_lengths": torch.tensor(target_lengths)}
    if unbatched:
        inputs["input_lengths"] = inputs["input_lengths"].reshape(())
        inputs["target_lengths"] = inputs["target_lengths"].reshape(())
    output = F.ctc_loss(inputs["logits"].log_softmax(-1), inputs["targets"], inputs["input_lengths"],
                        inputs["target_lengths"], blank=blank, reduction=reduction, zero_infinity=zero_infinity)
    outputs = {"output": output}
    cotangents = {n: cotangent_like(o) for n, o in outputs.items()}
    config = {"blank": blank, "reduction": reduction, "zero_infinity": zero_infinity}
    return finish_case("ctc_loss", config, inputs, lambda grad: {}, outputs, cotangents)


def grid_sample_case(seed, *, mode="bilinear", padding_mode="zeros", align_corners=False, affine=False,
                     x_shape=(2, 3, 5, 6), out_hw=(4, 7)):
    """F.grid_sample on a grid of random points reaching past [-1, 1] (so the padding modes matter), or
    on F.affine_grid of a random theta (both differentiable inputs)."""
    torch.manual_seed(seed)
    n = x_shape[0]
    inputs = {"x": leaf(randn(*x_shape))}
    if affine:
        inputs["theta"] = leaf(short(torch.eye(2, 3, dtype=DTYPE).expand(n, 2, 3) * 1.1 + randn(n, 2, 3, scale=0.3)))
        grid = F.affine_grid(inputs["theta"], (n, x_shape[1]) + out_hw, align_corners=align_corners)
    else:
        inputs["grid"] = leaf(short(torch.rand(n, *out_hw, 2, dtype=DTYPE) * 2.6 - 1.3))
        grid = inputs["grid"]
    outputs = {"output": F.grid_sample(inputs["x"], grid, mode=mode, padding_mode=padding_mode,
                                       align_corners=align_corners)}
    if affine:
        outputs["grid"] = grid
    cotangents = {name: cotangent_like(o) for name, o in outputs.items()}
    config = {"mode": mode, "padding_mode": padding_mode, "align_corners": align_corners, "affine": affine,
              "out_hw": list(out_hw)}
    return finish_case("grid_sample", config, inputs, lambda grad: {}, outputs, cotangents)


def main():
    cases = {
        "mha_self": mha_case(1, need_weights=True),
        "mha_self_causal": mha_case(2, is_causal=True),
        "mha_self_key_padding": mha_case(3, padding=True, need_weights=True),
        "mha_cross": mha_case(4, cross=True, d_model=6, tq=3, tk=5, padding=True),
        "mha_cross_kv_dim": mha_case(5, cross=True, d_model=6, kv_dim=4, tq=3, tk=4),
        "mha_grouped_query": grouped_query_case(6, num_kv_heads=2, need_weights=True),
        "mha_grouped_query_causal_padding": grouped_query_case(7, num_kv_heads=2, is_causal=True, padding=True),
        "mha_multi_query_causal": grouped_query_case(8, num_kv_heads=1, is_causal=True, need_weights=True),
        "sdpa_scale_bool_mask": attention_function_case(70, q_shape=(2, 2, 3, 4), k_shape=(2, 2, 5, 4), dv=3,
                                                        scale=0.3, mask="bool", mask_shape=(3, 5), need_weights=True),
        "sdpa_5d_float_mask_broadcast": attention_function_case(71, q_shape=(2, 2, 2, 3, 4), k_shape=(2, 2, 2, 4, 4),
                                                                dv=4, mask="float", mask_shape=(2, 1, 1, 3, 4)),
        "sdpa_causal_bottom_right": attention_function_case(72, q_shape=(1, 2, 3, 4), k_shape=(1, 2, 5, 4), dv=4,
                                                            is_causal=True, bottom_right=True, need_weights=True),
        "sdpa_causal_top_left_scale": attention_function_case(73, q_shape=(2, 1, 4, 3), k_shape=(2, 1, 6, 3), dv=2,
                                                              scale=0.5, is_causal=True),
        "encoder_layer_post_norm_relu": encoder_layer_case(10, norm_first=False, activation="relu"),
        "encoder_layer_post_norm_gelu": encoder_layer_case(11, norm_first=False, activation="gelu"),
        "encoder_layer_pre_norm_relu": encoder_layer_case(12, norm_first=True, activation="relu"),
        "encoder_layer_pre_norm_gelu_padding": encoder_layer_case(13, norm_first=True, activation="gelu",
                                                                  padding=True),
        "decoder_layer_post_norm_relu": decoder_layer_case(20, norm_first=False, activation="relu"),
        "decoder_layer_pre_norm_gelu_memory_padding": decoder_layer_case(21, norm_first=True, activation="gelu",
                                                                         memory_padding=True),
        "layer_norm": layer_norm_case(30),
        "feed_forward_relu": feed_forward_case(31, "relu"),
        "feed_forward_gelu": feed_forward_case(32, "gelu"),
        "moe_softmax_topk_relu": moe_case(40, weighting="softmax_topk", activation="relu"),
        "moe_softmax_then_topk_gelu": moe_case(41, weighting="softmax_then_topk", activation="gelu"),
        "moe_noisy_gating": noisy_moe_case(42, noise_seed=7, capacity_factor=0.0),
        "moe_noisy_gating_capacity": noisy_moe_case(43, noise_seed=11, capacity_factor=0.8),
        "rnn_tanh_2_layers": recurrent_case(50, "rnn_tanh"),
        "rnn_relu_bidirectional_lengths": recurrent_case(51, "rnn_relu", bidirectional=True, lengths=[5, 2, 4]),
        "lstm_2_layers_bidirectional": recurrent_case(52, "lstm", bidirectional=True),
        "lstm_batch_first_lengths_no_state": recurrent_case(53, "lstm", batch_first=True, lengths=[3, 5, 1],
                                                             initial_state=False),
        "lstm_bidirectional_lengths": recurrent_case(54, "lstm", num_layers=1, bidirectional=True,
                                                     lengths=[4, 5, 2]),
        "gru_2_layers": recurrent_case(55, "gru"),
        "gru_bidirectional_batch_first_lengths": recurrent_case(56, "gru", bidirectional=True, batch_first=True,
                                                                lengths=[2, 5, 3]),
        "einsum_matmul": einsum_case(80, "ij,jk->ik", (2, 3), (3, 4)),
        "einsum_attention_scores": einsum_case(81, "bhqd,bhkd->bhqk", (2, 2, 3, 4), (2, 2, 5, 4)),
        "einsum_diagonal": einsum_case(82, "ii->i", (3, 3)),
        "einsum_trace": einsum_case(83, "ii", (3, 3)),
        "einsum_repeated_label": einsum_case(84, "iij->j", (3, 3, 2)),
        "einsum_outer": einsum_case(85, "i,j->ij", (3,), (4,)),
        "einsum_size_1_broadcast": einsum_case(86, "ij,ij->ij", (3, 1), (3, 4)),
        "einsum_ellipsis_batch": einsum_case(87, "...ij,...jk->...ik", (2, 1, 3, 4), (5, 4, 2)),
        "einsum_ellipsis_trailing": einsum_case(88, "i...->i", (3, 2, 2)),
        "einsum_implicit_order": einsum_case(89, "ba", (2, 3)),
        "einsum_three_operands": einsum_case(90, "bn,anm,bm->ba", (2, 3), (4, 3, 2), (2, 2)),
        "embedding_bag_sum": embedding_bag_case(91, mode="sum"),
        "embedding_bag_sum_weighted": embedding_bag_case(92, mode="sum", weighted=True),
        "embedding_bag_mean": embedding_bag_case(93, mode="mean"),
        "mse_loss_none": mse_loss_case(94, "none"),
        "mse_loss_mean": mse_loss_case(95, "mean"),
        "mse_loss_sum": mse_loss_case(96, "sum"),
        "rnn_tanh_cell": cell_case(60, "rnn_tanh"),
        "rnn_relu_cell": cell_case(61, "rnn_relu"),
        "lstm_cell": cell_case(62, "lstm"),
        "gru_cell": cell_case(63, "gru"),
        "rms_norm": rms_norm_case(100),
        "rotary_4d": rotary_case(101, shape=(2, 2, 5, 6), offset=0),
        "rotary_offset": rotary_case(102, shape=(3, 4, 4), offset=7),
        "sinusoidal_even_offset": sinusoidal_case(103, shape=(2, 4, 6), offset=3),
        "sinusoidal_odd_dim": sinusoidal_case(104, shape=(2, 5, 5), offset=0),
        "latent_attention_q_lora": latent_attention_case(105, q_lora_rank=4),
        "latent_attention_q_proj_absorbed": latent_attention_case(106, q_lora_rank=0, absorb=True),
        "latent_attention_cached": latent_attention_case(107, q_lora_rank=3, prefix=3),
        "negative_sampling_loss_mean": negative_sampling_case(110, "mean"),
        "negative_sampling_loss_none": negative_sampling_case(111, "none"),
        "hierarchical_softmax_loss_mean": hierarchical_softmax_case(112, "mean"),
        "hierarchical_softmax_loss_sum": hierarchical_softmax_case(113, "sum"),
        "entropy_bits": information_case(114, "entropy", axis=-1, log_base=2.0),
        "cross_entropy_between_axis_1": information_case(115, "cross_entropy_between", axis=1, log_base=None),
        "kl_divergence_axis_0": information_case(116, "kl_divergence", axis=0, log_base=None),
        "pointer_sentinel": pointer_sentinel_case(117),
        "conv2d_stride_padding_dilation": conv_case(120, 2, x_shape=(2, 3, 6, 7), w_shape=(4, 3, 3, 2), stride=(2, 1),
                                                    padding=(1, 0), dilation=(1, 2)),
        "conv2d_groups_unbatched_no_bias": conv_case(121, 2, x_shape=(4, 5, 5), w_shape=(6, 2, 2, 2), bias=False,
                                                     padding=1, groups=2),
        "conv1d_stride_padding_dilation_groups": conv_case(122, 1, x_shape=(2, 4, 9), w_shape=(6, 2, 3), stride=2,
                                                           padding=1, dilation=2, groups=2),
        "max_pool2d_padding_dilation": pool_case(123, "max", 2, x_shape=(2, 3, 7, 6), kernel_size=(3, 2),
                                                 stride=(2, 2), padding=(1, 1), dilation=(1, 2)),
        "max_pool1d_default_stride": pool_case(124, "max", 1, x_shape=(2, 3, 10), kernel_size=3, padding=1),
        "avg_pool2d_count_include_pad_false": pool_case(125, "avg", 2, x_shape=(2, 3, 7, 6), kernel_size=(3, 2),
                                                        stride=(2, 1), padding=(1, 1), count_include_pad=False),
        "avg_pool1d_unbatched": pool_case(126, "avg", 1, x_shape=(3, 9), kernel_size=4, stride=3, padding=2),
        "unfold": unfold_case(127, x_shape=(2, 3, 5, 6), kernel_size=(2, 3), dilation=(2, 1), padding=(1, 2),
                              stride=(1, 2)),
        "batch_norm_2d_training": batch_norm_case(129, x_shape=(3, 4, 3, 2), training=True),
        "batch_norm_1d_training_momentum_no_affine": batch_norm_case(130, x_shape=(5, 3, 4), training=True,
                                                                     momentum=0.3, eps=1e-3, affine=False),
        "batch_norm_2d_eval": batch_norm_case(131, x_shape=(2, 3, 2, 2), training=False),
        "batch_norm_1d_training_2d_input": batch_norm_case(132, x_shape=(6, 4), training=True),
        "fold": unfold_case(128, x_shape=(2, 12, 12), kernel_size=(2, 2), padding=1, stride=2, fold_to=(6, 5)),
        "conv_transpose2d_stride_padding_output_padding_groups_dilation": conv_transpose_case(
            140, 2, x_shape=(2, 4, 3, 4), w_shape=(4, 3, 3, 2), stride=(2, 1), padding=(1, 0), output_padding=(1, 0),
            groups=2, dilation=(1, 2)),
        "conv_transpose2d_unbatched_no_bias": conv_transpose_case(141, 2, x_shape=(3, 4, 4), w_shape=(3, 2, 2, 2),
                                                                  bias=False, stride=2),
        "conv_transpose2d_output_padding_past_the_image": conv_transpose_case(
            142, 2, x_shape=(1, 2, 4, 3), w_shape=(2, 2, 3, 3), stride=1, dilation=2, output_padding=1),
        "conv_transpose1d_stride_padding_output_padding_groups": conv_transpose_case(
            143, 1, x_shape=(2, 4, 5), w_shape=(4, 2, 3), stride=3, padding=1, output_padding=2, groups=2),
        "conv2d_padding_same_odd_total_dilation": conv_case(153, 2, x_shape=(2, 3, 6, 7), w_shape=(4, 3, 4, 3),
                                                            padding="same", dilation=(1, 2)),
        "conv1d_padding_same_groups": conv_case(154, 1, x_shape=(2, 4, 9), w_shape=(6, 2, 4), padding="same", groups=2),
        "conv2d_padding_valid": conv_case(155, 2, x_shape=(2, 3, 6, 7), w_shape=(4, 3, 3, 3), padding="valid"),
        "pad_reflect": pad_case(156, x_shape=(2, 3, 4, 5), pads=(2, 1, 3, 0), mode="reflect"),
        "pad_replicate": pad_case(157, x_shape=(2, 3, 4, 5), pads=(1, 2, 1, 0), mode="replicate"),
        "pad_circular": pad_case(158, x_shape=(2, 3, 4, 5), pads=(2, 1, 1, 3), mode="circular"),
        "pad_reflect_1d": pad_case(159, x_shape=(2, 3, 6), pads=(3, 5), mode="reflect"),
        "pad_reflect_3d": pad_case(211, x_shape=(2, 2, 3, 4, 5), pads=(2, 1, 0, 3, 1, 2), mode="reflect"),
        "pad_replicate_3d": pad_case(212, x_shape=(1, 2, 3, 4, 2), pads=(1, 2, 2, 0, 3, 1), mode="replicate"),
        "group_norm_2d": group_norm_case(160, x_shape=(2, 6, 4, 3), groups=3),
        "group_norm_1d_no_affine_eps": group_norm_case(161, x_shape=(3, 4, 5), groups=2, affine=False, eps=1e-3),
        "group_norm_one_group": group_norm_case(162, x_shape=(2, 4, 3, 3), groups=1),
        "group_norm_instance": group_norm_case(163, x_shape=(2, 4, 7), groups=4),
        "instance_norm_2d_running": instance_norm_case(190, x_shape=(3, 4, 5, 3), use_input_stats=True,
                                                       momentum=0.3),
        "instance_norm_1d_plain": instance_norm_case(191, x_shape=(2, 3, 6), use_input_stats=True, running=False,
                                                     affine=False, eps=1e-3),
        "instance_norm_2d_eval": instance_norm_case(192, x_shape=(2, 3, 4, 4), use_input_stats=False),
        "conv3d_stride_padding_dilation": conv_case(193, 3, x_shape=(2, 3, 5, 6, 5), w_shape=(4, 3, 2, 3, 2),
                                                    stride=(2, 1, 1), padding=(1, 0, 1), dilation=(1, 2, 1)),
        "conv3d_groups_unbatched_same_no_bias": conv_case(194, 3, x_shape=(4, 5, 4, 4), w_shape=(6, 2, 3, 2, 2),
                                                          bias=False, padding="same", groups=2),
        "conv_transpose3d_stride_padding_output_padding_groups_dilation": conv_transpose_case(
            195, 3, x_shape=(2, 4, 3, 2, 3), w_shape=(4, 3, 2, 3, 2), stride=(2, 1, 2), padding=(1, 0, 0),
            output_padding=(1, 0, 1), groups=2, dilation=(1, 2, 1)),
        "max_pool3d_padding_dilation_ceil_mode": pool_case(196, "max", 3, x_shape=(2, 3, 6, 7, 5),
                                                           kernel_size=(3, 2, 2), stride=(2, 2, 1),
                                                           padding=(1, 1, 0), dilation=(1, 2, 1), ceil_mode=True),
        "avg_pool3d_ceil_mode_count_include_pad_false": pool_case(197, "avg", 3, x_shape=(2, 3, 6, 7, 5),
                                                                  kernel_size=(3, 2, 2), stride=2, padding=(1, 0, 1),
                                                                  count_include_pad=False, ceil_mode=True),
        "avg_pool3d_unbatched": pool_case(198, "avg", 3, x_shape=(3, 4, 4, 6), kernel_size=2),
        "adaptive_avg_pool3d_overlapping": adaptive_pool_case(199, "avg", 3, x_shape=(2, 3, 5, 7, 4),
                                                              output_size=(3, 4, 3)),
        "adaptive_max_pool3d_overlapping": adaptive_pool_case(200, "max", 3, x_shape=(2, 3, 5, 7, 4),
                                                              output_size=(2, 4, 3)),
        "batch_norm_3d_training": batch_norm_case(201, x_shape=(2, 3, 3, 4, 2), training=True),
        "instance_norm_3d_running": instance_norm_case(202, x_shape=(2, 3, 3, 4, 2), use_input_stats=True),
        "interpolate_nearest_size": resample_case(164, "interpolate", x_shape=(2, 3, 3, 4), size=(5, 7)),
        "interpolate_nearest_scale_1d": resample_case(165, "interpolate", x_shape=(2, 3, 5), scale_factor=1.7),
        "interpolate_bilinear_size": resample_case(166, "interpolate", x_shape=(2, 2, 4, 5), size=(7, 3),
                                                   mode="bilinear", align_corners=False),
        "interpolate_bilinear_align_corners": resample_case(167, "interpolate", x_shape=(2, 2, 4, 5), size=(6, 8),
                                                            mode="bilinear", align_corners=True),
        "interpolate_bilinear_scale": resample_case(168, "interpolate", x_shape=(1, 2, 4, 5), scale_factor=(2.0, 0.5),
                                                    mode="bilinear"),
        "interpolate_trilinear_size": resample_case(208, "interpolate", x_shape=(2, 2, 3, 4, 5), size=(5, 3, 7),
                                                    mode="trilinear"),
        "interpolate_trilinear_align_corners_scale": resample_case(209, "interpolate", x_shape=(1, 2, 3, 4, 2),
                                                                   scale_factor=(1.5, 2.0, 3.0), mode="trilinear",
                                                                   align_corners=True),
        "interpolate_nearest_3d": resample_case(210, "interpolate", x_shape=(1, 2, 3, 4, 5), size=(6, 3, 7)),
        "interpolate_linear_scale": resample_case(169, "interpolate", x_shape=(2, 3, 6), scale_factor=2.5,
                                                  mode="linear"),
        "pixel_shuffle": resample_case(170, "pixel_shuffle", x_shape=(2, 8, 3, 2), factor=2),
        "pixel_unshuffle_unbatched": resample_case(171, "pixel_unshuffle", x_shape=(3, 6, 4), factor=2),
        "hardtanh_bounds": activation_case(172, "hardtanh", x_shape=(3, 5), min_val=-2.0, max_val=0.5),
        "relu6": activation_case(173, "relu6", x_shape=(3, 5), scale=5.0),
        # torch's hardsigmoid backward multiplies by 1.0f / 6.0f, a float32 sixth, in float64 too (3e-8 off);
        # tapegrad's gradient is the exact 1/6, so the input gradient is compared to 1e-7.
        "hardsigmoid": activation_case(174, "hardsigmoid", x_shape=(3, 5), grad_rel_tol=1e-7),
        "hardswish": activation_case(175, "hardswish", x_shape=(3, 5)),
        "logsigmoid": activation_case(176, "logsigmoid", x_shape=(3, 5), scale=20.0),
        "softsign": activation_case(177, "softsign", x_shape=(3, 5)),
        "softshrink": activation_case(203, "softshrink", x_shape=(3, 5), lambd=1.0),
        "hardshrink": activation_case(204, "hardshrink", x_shape=(3, 5), lambd=0.7),
        "tanhshrink": activation_case(205, "tanhshrink", x_shape=(3, 5)),
        "threshold": activation_case(206, "threshold", x_shape=(3, 5), threshold=0.3, value=-2.0),
        "softmin": activation_case(207, "softmin", x_shape=(3, 5), dim=1),
        "hinge_embedding_loss": loss_case(213, "hinge_embedding_loss", margin=1.5),
        "multi_margin_loss_weighted": loss_case(214, "multi_margin_loss", shape=(4, 5), weighted=True),
        "multi_margin_loss_squared_none": loss_case(215, "multi_margin_loss", shape=(4, 5), p=2, margin=0.7,
                                                    reduction="none"),
        "multi_margin_loss_unbatched": loss_case(216, "multi_margin_loss", shape=(5,), reduction="sum"),
        "multilabel_margin_loss": loss_case(217, "multilabel_margin_loss"),
        "multilabel_margin_loss_unbatched": loss_case(218, "multilabel_margin_loss", unbatched=True,
                                                      reduction="none"),
        "multilabel_soft_margin_loss_weighted": loss_case(219, "multilabel_soft_margin_loss", weighted=True),
        "multilabel_soft_margin_loss_none": loss_case(220, "multilabel_soft_margin_loss", reduction="none"),
        "poisson_nll_loss_log_input": loss_case(221, "poisson_nll_loss", log_input=True, full=False),
        "poisson_nll_loss_rate_full": loss_case(222, "poisson_nll_loss", log_input=False, full=True, eps=1e-3,
                                                reduction="none"),
        "gaussian_nll_loss": loss_case(223, "gaussian_nll_loss", var_shape=(3, 4)),
        "gaussian_nll_loss_row_variance": loss_case(224, "gaussian_nll_loss", var_shape=(3,), reduction="sum"),
        "lp_pool1d_ceil_mode": pool_case(230, "lp", 1, x_shape=(2, 3, 9), kernel_size=3, stride=2, ceil_mode=True,
                                         norm_type=2.0),
        "lp_pool2d": pool_case(231, "lp", 2, x_shape=(2, 2, 6, 7), kernel_size=(3, 2), stride=(2, 1), norm_type=3.0),
        "lp_pool3d": pool_case(232, "lp", 3, x_shape=(1, 2, 4, 5, 4), kernel_size=(2, 3, 2), norm_type=1.5),
        "grid_sample_bilinear_zeros": grid_sample_case(233),
        "grid_sample_bilinear_border_align_corners": grid_sample_case(234, padding_mode="border", align_corners=True),
        "grid_sample_bilinear_reflection": grid_sample_case(235, padding_mode="reflection"),
        "grid_sample_bilinear_reflection_align_corners": grid_sample_case(236, padding_mode="reflection",
                                                                          align_corners=True),
        "grid_sample_nearest_zeros": grid_sample_case(237, mode="nearest"),
        "grid_sample_affine_grid": grid_sample_case(238, affine=True),
        "grid_sample_affine_grid_align_corners": grid_sample_case(239, affine=True, align_corners=True,
                                                                  padding_mode="border", out_hw=(3, 1)),
        "ctc_loss_padded_mean": ctc_case(226, frames=7, classes=5, targets=[[1, 1, 2, 0], [3, 4, 0, 0], [2, 3, 1, 4]],
                                         input_lengths=[7, 5, 6], target_lengths=[3, 2, 4]),
        "ctc_loss_concatenated_blank_sum": ctc_case(227, frames=6, classes=4, targets=[0, 1, 1, 3, 0, 0],
                                                    input_lengths=[6, 4, 3], target_lengths=[3, 1, 2], blank=2,
                                                    reduction="sum"),
        "ctc_loss_zero_infinity_none": ctc_case(228, frames=5, classes=4, targets=[[1, 1, 1], [2, 3, 0], [3, 0, 0]],
                                                input_lengths=[4, 5, 5], target_lengths=[3, 2, 0], reduction="none",
                                                zero_infinity=True),
        "ctc_loss_unbatched": ctc_case(229, frames=6, classes=5, targets=[4, 2, 2], input_lengths=[6],
                                       target_lengths=[3], reduction="none", unbatched=True),
        "gaussian_nll_loss_column_full": loss_case(225, "gaussian_nll_loss", var_shape=(3, 1), full=True, eps=1e-4),
        "glu_axis_1": activation_case(178, "glu", x_shape=(2, 6, 3), dim=1),
        "prelu_per_channel": activation_case(179, "prelu", x_shape=(2, 3, 4), channels=3),
        "prelu_shared": activation_case(180, "prelu", x_shape=(4, 5), channels=1),
        "max_pool2d_ceil_mode": pool_case(144, "max", 2, x_shape=(2, 3, 8, 7), kernel_size=(3, 2), stride=2,
                                          padding=(1, 0), ceil_mode=True),
        "max_pool1d_ceil_mode_dilation": pool_case(145, "max", 1, x_shape=(2, 3, 10), kernel_size=3, stride=2,
                                                   padding=1, dilation=2, ceil_mode=True),
        "avg_pool2d_ceil_mode": pool_case(146, "avg", 2, x_shape=(2, 3, 8, 7), kernel_size=(3, 2), stride=2,
                                          padding=(1, 0), ceil_mode=True),
        "avg_pool2d_ceil_mode_count_include_pad_false": pool_case(147, "avg", 2, x_shape=(2, 3, 8, 7),
                                                                  kernel_size=(3, 2), stride=2, padding=(1, 1),
                                                                  count_include_pad=False, ceil_mode=True),
        "adaptive_avg_pool2d_overlapping": adaptive_pool_case(148, "avg", 2, x_shape=(2, 3, 7, 5), output_size=(3, 4)),
        "adaptive_avg_pool2d_global": adaptive_pool_case(149, "avg", 2, x_shape=(2, 3, 6, 5), output_size=1),
        "adaptive_avg_pool1d_unbatched": adaptive_pool_case(150, "avg", 1, x_shape=(3, 10), output_size=4),
        "adaptive_max_pool2d_overlapping": adaptive_pool_case(151, "max", 2, x_shape=(2, 3, 7, 5), output_size=(4, 3)),
        "adaptive_max_pool1d": adaptive_pool_case(152, "max", 1, x_shape=(2, 3, 9), output_size=4),
    }
    fixture = {
        "generator": "tests/torch_reference/make_reference.py",
        "torch_version": torch.__version__,
        "numpy_version": np.__version__,
        "dtype": "float64",
        "loss": "sum over outputs o of sum(o * cotangents[o]); grads are d loss / d input and d loss / d param",
        "cases": cases,
    }
    text = json.dumps(fixture, separators=(",", ":"))
    os.makedirs(os.path.dirname(OUT_PATH), exist_ok=True)
    with open(OUT_PATH, "w") as f:
        f.write(text)
        f.write("\n")
    print(f"wrote {os.path.normpath(OUT_PATH)}: {len(cases)} cases, {len(text) / 1024:.1f} KB")


if __name__ == "__main__":
    main()
