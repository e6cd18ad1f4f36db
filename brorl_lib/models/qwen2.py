"""Qwen2 arithmetic from a config alone (no torch import): what a model of that config holds."""

from __future__ import annotations


def parameter_count(cfg: dict) -> int:
    """Parameters of a Qwen2 decoder from its config.json (q/k/v biases, untied head unless tie_word_embeddings)."""
    h, layers, inter, vocab = (cfg[k] for k in ("hidden_size", "num_hidden_layers", "intermediate_size", "vocab_size"))
    heads = cfg["num_attention_heads"]
    head_dim = cfg.get("head_dim") or h // heads
    q, kv = heads * head_dim, cfg.get("num_key_value_heads", heads) * head_dim
    per_layer = (h * q + q) + 2 * (h * kv + kv) + q * h + 3 * h * inter + 2 * h  # attention, MLP, two norms
    return layers * per_layer + vocab * h * (1 if cfg.get("tie_word_embeddings") else 2) + h  # + final norm


def tensor_shapes(cfg: dict) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every weight of transformers' Qwen2ForCausalLM with this config.json, as its checkpoints
    store them (``lm_head.weight`` only with an untied head); the shapes sum to ``parameter_count``."""
    h, layers, inter, vocab = (cfg[k] for k in ("hidden_size", "num_hidden_layers", "intermediate_size", "vocab_size"))
    heads = cfg["num_attention_heads"]
    head_dim = cfg.get("head_dim") or h // heads
    q, kv = heads * head_dim, cfg.get("num_key_value_heads", heads) * head_dim
    out: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (vocab, h), "model.norm.weight": (h,)}
    for i in range(layers):
        p = f"model.layers.{i}."
        for name, rows in (("q_proj", q), ("k_proj", kv), ("v_proj", kv)):
            out[f"{p}self_attn.{name}.weight"], out[f"{p}self_attn.{name}.bias"] = (rows, h), (rows,)
        out[f"{p}self_attn.o_proj.weight"] = (h, q)
        out[f"{p}mlp.gate_proj.weight"] = out[f"{p}mlp.up_proj.weight"] = (inter, h)
        out[f"{p}mlp.down_proj.weight"] = (h, inter)
        out[f"{p}input_layernorm.weight"] = out[f"{p}post_attention_layernorm.weight"] = (h,)
    if not cfg.get("tie_word_embeddings"):
        out["lm_head.weight"] = (vocab, h)
    return out
