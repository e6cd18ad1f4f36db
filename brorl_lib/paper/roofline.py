"""A roofline model of autoregressive decoding, to explain Table 2's generation throughput.

One decode step advances every running sequence by one token. It reads the weights once, reads each
sequence's KV cache (the shared prompt part once per group when the engine shares prefixes in
attention), and does about 2 FLOPs per weight per sequence plus the attention products. Its time is
the larger of bytes / bandwidth and FLOPs / peak rate. Everything is in bytes, FLOPs and seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from brorl_lib.core.validation import check_int, check_positive, check_range
from brorl_lib.facts.arms import Arm


@dataclass(frozen=True)
class ModelShape:
    """A Qwen2-architecture decoder. Defaults: the 1.5B model of the paper (DeepSeek-R1-Distill-Qwen-1.5B,
    Qwen2.5-1.5B family), as in its public config.json: hidden_size 1536, num_hidden_layers 28,
    num_attention_heads 12, num_key_value_heads 2, intermediate_size 8960, vocab_size 151936."""

    layers: int = 28
    hidden: int = 1536
    heads: int = 12
    kv_heads: int = 2
    intermediate: int = 8960
    vocab: int = 151_936
    bytes_per_value: int = 2  # bf16 weights and KV cache

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def matmul_params(self) -> int:
        """Weights used in matrix products per token: q, k, v, o projections, the MLP, and the LM head."""
        attn = self.hidden * (self.hidden + 2 * self.kv_heads * self.head_dim) + self.hidden * self.hidden
        mlp = 3 * self.hidden * self.intermediate
        return self.layers * (attn + mlp) + self.vocab * self.hidden

    def kv_bytes_per_token(self) -> int:
        """KV cache of one token: keys and values, every layer, every KV head."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.bytes_per_value


@dataclass(frozen=True)
class Hardware:
    """Defaults: NVIDIA H100 SXM5 80 GB (NVIDIA datasheet): 989.4 TFLOP/s dense BF16 tensor-core rate,
    3.35 TB/s HBM3 bandwidth, 80 GB memory."""

    peak_flops: float = 989.4e12
    bandwidth: float = 3.35e12
    memory_bytes: float = 80e9
    memory_utilization: float = 0.9  # our choice: the share an inference engine may use (vLLM's default is 0.9)

    @property
    def ridge(self) -> float:
        """Arithmetic intensity (FLOPs per byte) where the roofline turns from memory- to compute-bound."""
        return self.peak_flops / self.bandwidth


def decode_step(
    model: ModelShape,
    hw: Hardware,
    sequences: int,
    group_size: int,
    prompt_len: float,
    generated: float,
    shared_prefix: bool,
) -> dict[str, float]:
    """Bytes, FLOPs and time of one decode step for ``sequences`` running sequences.

    Sequences come in groups of ``group_size`` that share a prompt of ``prompt_len`` tokens; each has
    ``generated`` tokens of its own so far. With ``shared_prefix`` the prompt's KV is read once per group.
    """
    check_int("sequences", sequences, low=1)
    check_int("group_size", group_size, low=1)
    check_range("prompt_len", prompt_len, low=0)
    check_range("generated", generated, low=0)
    groups = sequences / group_size
    prompt_reads = groups if shared_prefix else sequences
    kv_tokens_read = prompt_reads * prompt_len + sequences * generated
    weight_bytes = model.matmul_params() * model.bytes_per_value
    kv_bytes = kv_tokens_read * model.kv_bytes_per_token()
    context = prompt_len + generated
    attn_flops = sequences * 4 * model.layers * model.heads * model.head_dim * context  # QK^T and AV
    flops = 2 * model.matmul_params() * sequences + attn_flops
    bytes_moved = weight_bytes + kv_bytes
    time = max(bytes_moved / hw.bandwidth, flops / hw.peak_flops)
    return {
        "flops": flops,
        "bytes": bytes_moved,
        "time_s": time,
        "intensity": flops / bytes_moved,
        "tokens_per_s": sequences / time,
        "memory_bound": bytes_moved / hw.bandwidth >= flops / hw.peak_flops,
    }


def max_concurrency(
    model: ModelShape, hw: Hardware, group_size: int, prompt_len: float, response_len: float, shared_prefix: bool
) -> int:
    """Sequences whose full KV cache fits beside the weights (the prompt stored once per group if shared)."""
    free = hw.memory_bytes * hw.memory_utilization - model.matmul_params() * model.bytes_per_value
    per_seq_tokens = response_len + (prompt_len / group_size if shared_prefix else prompt_len)
    return max(1, int(free // (per_seq_tokens * model.kv_bytes_per_token())))


def arm_throughput(
    arm: Arm,
    gpus: int,
    model: ModelShape,
    hw: Hardware,
    prompt_len: float,
    response_len: float,
    shared_prefix: bool,
) -> dict[str, float]:
    """Samples/s of ``gpus`` GPUs: each decodes its share of the step's rollouts, as many at once as fit in
    memory, over a response of ``response_len`` tokens (evaluated at its mid-point)."""
    check_int("gpus", gpus, low=1)
    check_positive("response_len", response_len)
    concurrency = min(
        max(1, arm.samples_per_step // gpus),
        max_concurrency(model, hw, arm.n_rollouts, prompt_len, response_len, shared_prefix),
    )
    step = decode_step(
        model, hw, concurrency, min(arm.n_rollouts, concurrency), prompt_len, response_len / 2, shared_prefix
    )
    samples_per_s = step["tokens_per_s"] / response_len * gpus
    return {
        "arm": arm.name,
        "concurrency_per_gpu": concurrency,
        **step,
        "samples_per_s": samples_per_s,
        "shared_prefix": shared_prefix,
    }
