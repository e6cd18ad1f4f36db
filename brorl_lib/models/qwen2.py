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
