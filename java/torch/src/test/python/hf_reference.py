#!/usr/bin/python3
"""Independent reference forward of the Llama / Qwen2 / Qwen3 dense families (Hugging Face transformers'
formulas, written from scratch on torch in float64) over checkpoint directories Arbor wrote.

It shares no code with Arbor: it parses config.json with transformers' defaults, reads the safetensors
files itself (header JSON + raw little-endian data; sharded through model.safetensors.index.json), and
computes the logits of every position of each token sequence.

Usage: hf_reference.py MANIFEST.json
  MANIFEST: [{"model": DIR, "tokens": [[id, ...], ...], "out": FILE}, ...]
  FILE receives the logits of all sequences, concatenated row-major as little-endian float64 [sum T, V].
Prints one line per model: its family, vocab and the tensors read.
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        begin, end = e["data_offsets"]
        raw = data[base + begin:base + end]
        dt = e["dtype"]
        if dt == "F32":
            arr = np.frombuffer(raw, dtype="<f4").astype(np.float64)
        elif dt == "F16":
            arr = np.frombuffer(raw, dtype="<f2").astype(np.float64)
        elif dt == "BF16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            arr = bits.view(np.float32).astype(np.float64)
        elif dt == "F64":
            arr = np.frombuffer(raw, dtype="<f8").astype(np.float64)
        else:
            raise ValueError("%s: tensor %s has dtype %s" % (path, name, dt))
        out[name] = torch.from_numpy(arr.copy()).reshape(e["shape"])
    return out


def read_weights(d):
    index = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    w = {}
    for name in files:
        w.update(read_safetensors(os.path.join(d, name)))
    return w


def load_config(d):
    with open(os.path.join(d, "config.json")) as f:
        c = json.load(f)
    mt = c["model_type"]
    assert mt in ("llama", "qwen2", "qwen3"), mt
    arch = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}[mt]
    assert c["architectures"] == [arch], c["architectures"]
    assert c["torch_dtype"] in ("float32", "bfloat16", "float16"), c["torch_dtype"]
    assert c.get("hidden_act", "silu") == "silu"
    heads = c["num_attention_heads"]
    cfg = {
        "family": mt,
        "vocab": c["vocab_size"],
        "hidden": c["hidden_size"],
        "layers": c["num_hidden_layers"],
        "heads": heads,
        "kv": c.get("num_key_value_heads") or heads,
        # transformers: Qwen3Config.head_dim defaults to 128; Llama/Qwen2 fall back to hidden / heads
        "head_dim": c.get("head_dim") or (128 if mt == "qwen3" else c["hidden_size"] // heads),
        "eps": c.get("rms_norm_eps", 1e-6),
        "theta": c.get("rope_theta", 10000.0),
        "scaling": c.get("rope_scaling"),
        "tied": c.get("tie_word_embeddings", False),
        # Qwen2Attention: bias on q/k/v always, never on o; Llama/Qwen3: attention_bias on all four
        "qkv_bias": mt == "qwen2" or c.get("attention_bias", False),
        "o_bias": mt != "qwen2" and c.get("attention_bias", False),
        "qk_norm": mt == "qwen3",
    }
    return cfg


def inv_freq(cfg):
    hd = cfg["head_dim"]
    f = 1.0 / (cfg["theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    s = cfg["scaling"]
    if s is not None and s.get("rope_type", s.get("type")) == "llama3":
        # transformers' _compute_llama3_parameters
        factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
        old = s["original_max_position_embeddings"]
        low_wavelen, high_wavelen = old / low, old / high
        wavelen = 2 * math.pi / f
        scaled = torch.where(wavelen > low_wavelen, f / factor, f)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
        f = torch.where(medium, smoothed, scaled)
    elif s is not None:
        assert s.get("rope_type", s.get("type")) == "default", s
    return f


def rms_norm(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def forward(cfg, w, tokens):
    t = len(tokens)
    hd, h, kv = cfg["head_dim"], cfg["heads"], cfg["kv"]
    x = w["model.embed_tokens.weight"][torch.tensor(tokens)]
    pos = torch.arange(t, dtype=torch.float64)
    freqs = torch.outer(pos, inv_freq(cfg))
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]  # [T, 1, hd]
    mask = torch.full((t, t), float("-inf"), dtype=torch.float64).triu(1)
    for l in range(cfg["layers"]):
        p = "model.layers.%d." % l

        def proj(name, inp, bias):
            y = inp @ w[p + name + ".weight"].T
            return y + w[p + name + ".bias"] if bias else y

        a = rms_norm(x, w[p + "input_layernorm.weight"], cfg["eps"])
        q = proj("self_attn.q_proj", a, cfg["qkv_bias"]).view(t, h, hd)
        k = proj("self_attn.k_proj", a, cfg["qkv_bias"]).view(t, kv, hd)
        v = proj("self_attn.v_proj", a, cfg["qkv_bias"]).view(t, kv, hd)
        if cfg["qk_norm"]:  # Qwen3: RMSNorm over head_dim, before RoPE
            q = rms_norm(q, w[p + "self_attn.q_norm.weight"], cfg["eps"])
            k = rms_norm(k, w[p + "self_attn.k_norm.weight"], cfg["eps"])
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        # repeat_kv: query head j reads key/value head j // (h / kv)
        k = k.repeat_interleave(h // kv, dim=1)
        v = v.repeat_interleave(h // kv, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q, k) * hd ** -0.5 + mask
        o = torch.einsum("hqk,khd->qhd", torch.softmax(scores, dim=-1), v).reshape(t, h * hd)
        x = x + proj("self_attn.o_proj", o, cfg["o_bias"])
        m = rms_norm(x, w[p + "post_attention_layernorm.weight"], cfg["eps"])
        gate = m @ w[p + "mlp.gate_proj.weight"].T
        up = m @ w[p + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, w["model.norm.weight"], cfg["eps"])
    head = w["model.embed_tokens.weight"] if cfg["tied"] else w["lm_head.weight"]
    return x @ head.T


def main():
    with open(sys.argv[1]) as f:
        manifest = json.load(f)
    for case in manifest:
        cfg = load_config(case["model"])
        w = read_weights(case["model"])
        expected = {"model.embed_tokens.weight", "model.norm.weight"}
        if not cfg["tied"]:
            expected.add("lm_head.weight")
        for l in range(cfg["layers"]):
            p = "model.layers.%d." % l
            expected |= {p + n + ".weight" for n in ("input_layernorm", "post_attention_layernorm", "self_attn.q_proj",
                                                     "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                                     "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")}
            if cfg["qkv_bias"]:
                expected |= {p + "self_attn.%s_proj.bias" % n for n in "qkv"}
            if cfg["o_bias"]:
                expected.add(p + "self_attn.o_proj.bias")
            if cfg["qk_norm"]:
                expected |= {p + "self_attn.q_norm.weight", p + "self_attn.k_norm.weight"}
        assert set(w) == expected, "tensors differ: extra %s, missing %s" % (set(w) - expected, expected - set(w))
        rows = [forward(cfg, w, seq) for seq in case["tokens"]]
        out = torch.cat(rows, dim=0).numpy().astype("<f8")
        out.tofile(case["out"])
        print("%s: %s vocab %d, %d tensors, logits %s" % (case["model"], cfg["family"], cfg["vocab"], len(w), tuple(out.shape)))


if __name__ == "__main__":
    torch.set_grad_enabled(False)
    main()
