"""A continuous-token builder for DeepSeek-R1-distilled Qwen checkpoints, which verl 0.9.1 cannot build.

verl's agent loop (``verl/experimental/agent_loop/agent_loop.py``, ``AgentLoopBase.__init__``) picks its
continuous-token builder from ``config.json``'s ``model_type`` alone
(``verl/utils/tokenizer/continuous_token_wiring.py``): ``qwen2`` selects the Qwen builder, whose constructor
requires the ChatML token ``<|im_end|>`` (``verl/utils/tokenizer/continuous_token.py``,
``QwenContinuousTokenBuilder``). The paper's start model descends from DeepSeek-R1-Distill-Qwen-1.5B:
``model_type: qwen2`` with DeepSeek's tokenizer and chat template, which have no ``<|im_end|>``, so every run
dies before its first rollout (verl issue #7637; the fixes, PRs #7638-#7640, are not in 0.9.1).

The fallback here chooses by the tokenizer, as PR #7639 proposes: when the model type selects a Qwen
builder but the tokenizer lacks ``<|im_end|>`` and has DeepSeek's end-of-sentence token, verl's own
DeepSeek builder (the one that matches the chat template) is used. Every other model gets verl's choice.

verl imports this module in every process (``VERL_USE_EXTERNAL_MODULES``; every launch script lists it).
Importing it replaces ``create_continuous_token_builder`` in verl's wiring module and, if already imported,
in the agent loop, which imports the function by name. ``check_targets`` checks the pinned verl still holds
what the replacement stands in for.
"""

from __future__ import annotations

import functools
import inspect
import logging

MODULE = "brorl_lib.verl_recipe.tokenizer_fallback"
VERL_VERSION = "0.9.1"
CHATML_END = "<|im_end|>"
DEEPSEEK_EOS = "<\uff5cend\u2581of\u2581sentence\uff5c>"  # <｜end▁of▁sentence｜>
QWEN_MODEL_TYPES = ("qwen2", "qwen3", "qwen3_moe", "qwen3_5", "qwen3_5_moe")  # verl 0.9.1's Qwen families
WIRING = "verl.utils.tokenizer.continuous_token_wiring"
AGENT_LOOP = "verl.experimental.agent_loop.agent_loop"
# (module, text): what the replacement relies on in the pinned verl
TARGETS = (
    (WIRING, '"qwen2": ContinuousTokenModelFamily.QWEN'),
    ("verl.utils.tokenizer.continuous_token", 'self._im_end_id = require_token_id(tokenizer, "<|im_end|>")'),
    (AGENT_LOOP, "self.continuous_token_builder = create_continuous_token_builder("),
)

logger = logging.getLogger(__name__)
_announced: set[str] = set()  # model types the fallback has been logged for in this process (once each)


def has_token(tokenizer, token: str) -> bool:
    """Whether ``token`` is one known token of ``tokenizer`` (not the unknown token)."""
    token_id = tokenizer.convert_tokens_to_ids(token)
    unk = getattr(tokenizer, "unk_token_id", None)
    return isinstance(token_id, int) and token_id >= 0 and token_id != unk


def fallback_family(tokenizer, hf_model_type: str | None) -> str | None:
    """``"deepseek"`` for a Qwen model type with a DeepSeek tokenizer (no ``<|im_end|>``); None: verl's choice."""
    model_type = (hf_model_type or "").strip().lower()
    if model_type in QWEN_MODEL_TYPES and not has_token(tokenizer, CHATML_END) and has_token(tokenizer, DEEPSEEK_EOS):
        return "deepseek"
    return None


def with_fallback(create):
    """verl's ``create_continuous_token_builder`` choosing the DeepSeek builder where ``fallback_family`` says."""
    if getattr(create, "brorl_fallback", False):
        return create

    @functools.wraps(create)
    def create_with_fallback(tokenizer, *, model_family="auto", hf_model_type=None, **kwargs):
        family = fallback_family(tokenizer, hf_model_type) if str(model_family).lower() == "auto" else None
        if family is not None and hf_model_type not in _announced:
            _announced.add(hf_model_type)
            logger.warning(
                "config.json model_type=%r selects verl's Qwen builder, but the tokenizer has no %s and has "
                "DeepSeek's %s: using the %s builder (%s)",
                hf_model_type,
                CHATML_END,
                DEEPSEEK_EOS,
                family,
                MODULE,
            )
        if family is not None:
            model_family = family
        return create(tokenizer, model_family=model_family, hf_model_type=hf_model_type, **kwargs)

    create_with_fallback.brorl_fallback = True
    return create_with_fallback


def build_builder(tokenizer, hf_model_type: str | None):
    """The builder verl's agent loop makes for this tokenizer and model type, with the fallback applied."""
    from verl.utils.tokenizer import continuous_token_wiring

    return with_fallback(continuous_token_wiring.create_continuous_token_builder)(
        tokenizer, hf_model_type=hf_model_type
    )


def check_targets() -> None:
    """RuntimeError unless the installed verl is the pinned one and still holds what the fallback relies on."""
    import importlib

    import verl

    if verl.__version__ != VERL_VERSION:
        raise RuntimeError(f"{MODULE} was written for verl {VERL_VERSION}, found {verl.__version__}: re-check it")
    for module, text in TARGETS:
        if text not in inspect.getsource(importlib.import_module(module)):
            raise RuntimeError(
                f"{module} no longer contains {text!r}: the fallback in {MODULE} may be wrong or unneeded"
            )


def install() -> None:
    """Replace the builder factory in verl's wiring module and, if it is loaded, in the agent loop."""
    import sys

    from verl.utils.tokenizer import continuous_token_wiring

    continuous_token_wiring.create_continuous_token_builder = with_fallback(
        continuous_token_wiring.create_continuous_token_builder
    )
    agent_loop = sys.modules.get(AGENT_LOOP)
    if agent_loop is not None:
        agent_loop.create_continuous_token_builder = continuous_token_wiring.create_continuous_token_builder


install()
