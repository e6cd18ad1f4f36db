"""A tiny Qwen2 and its tokenizer for the CPU run, warm-started on the recipe's own training prompts.

The paper's start model descends from DeepSeek-R1-Distill-Qwen-1.5B: ``model_type: qwen2`` with DeepSeek's
tokenizer and chat template, no ChatML tokens. The tiny model is built the same way, so the CPU run meets
what a cluster run meets: verl 0.9.1 picks its Qwen continuous-token builder from ``model_type`` and that
builder requires ``<|im_end|>`` (``tokenizer_fallback`` is the fix every launch loads). The tokenizer is
character-level over GPT-2's 256 byte-level characters (any text encodes, one token per byte) plus
DeepSeek's special tokens ``<｜begin▁of▁sentence｜>``, ``<｜end▁of▁sentence｜>`` (end of turn and padding,
as in the R1 distills), ``<｜User｜>`` and ``<｜Assistant｜>``, with the R1 distills' chat template (the
generation prompt opens ``<think>``). The warm start is supervised: "<answer>{answer}</answer>" and the
end-of-sentence token after each templated prompt (the recipe's prompt and the evaluation protocol's),
the prompt masked, so that the model answers in the recipe's format and gets some, not all, answers right:
the pass rate strictly between 0 and 1 that dynamic sampling needs, and a score above 0 under
``python -m brorl_lib.evaluation``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from brorl_lib.core import atomic
from brorl_lib.models.tiny import IGNORE, TinyModelShape, build_model, train_sft

BOS = "<\uff5cbegin\u2581of\u2581sentence\uff5c>"  # <｜begin▁of▁sentence｜>
EOS = "<\uff5cend\u2581of\u2581sentence\uff5c>"  # <｜end▁of▁sentence｜>: end of turn, also padding
USER, ASSISTANT = "<\uff5cUser\uff5c>", "<\uff5cAssistant\uff5c>"
# DeepSeek-R1-Distill-Qwen's chat template for system, user and assistant turns (no tools): the system prompt
# after the BOS token, an assistant turn's reasoning before </think> dropped, the generation prompt opening <think>.
CHAT_TEMPLATE = (
    "{% set ns = namespace(system_prompt='') %}{% for message in messages %}{% if message['role'] == 'system' %}"
    "{% set ns.system_prompt = message['content'] %}{% endif %}{% endfor %}{{ bos_token }}{{ ns.system_prompt }}"
    "{% for message in messages %}{% if message['role'] == 'user' %}{{ '" + USER + "' + message['content'] }}"
    "{% elif message['role'] == 'assistant' %}{% set content = message['content'] %}"
    "{% if '</think>' in content %}{% set content = content.split('</think>')[-1] %}{% endif %}"
    "{{ '" + ASSISTANT + "' + content + '" + EOS + "' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '" + ASSISTANT + "<think>\\n' }}{% endif %}"
)
# What DeepSeek-R1-Distill-Qwen's tokenizer_config.json says beside the tokens: LlamaTokenizerFast and no
# unknown token. Without "unk_token": null, transformers (5.x, model_type qwen2) loads a Qwen2 tokenizer that
# adds "<|endoftext|>" as its unknown token, "<|im_end|>" then resolves to it, and verl's Qwen builder is
# built silently on the wrong id instead of failing as it does on the real model.
SAVED_CONFIG = {"tokenizer_class": "LlamaTokenizerFast", "unk_token": None}


# Our choice: a model that learns the answer format in a minute on 2 cores (about 0.09M parameters), positions for
# the CPU profile's prompt plus response length, with room.
CPU_RUN_SHAPE = TinyModelShape(hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128, max_positions=1536)


def build_tokenizer() -> PreTrainedTokenizerFast:
    """One token per byte (GPT-2's byte-level characters), plus DeepSeek-R1-Distill's four special tokens."""
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {tok: i for i, tok in enumerate(sorted(alphabet))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=None))
    # bytes first (a line break becomes "Ċ"), then each byte-level character is its own piece
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            pre_tokenizers.Split(pattern="", behavior="isolated"),
        ]
    )
    core.decoder = decoders.ByteLevel()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, padding_side="left")
    tok.add_special_tokens(
        {"bos_token": BOS, "eos_token": EOS, "pad_token": EOS, "additional_special_tokens": [USER, ASSISTANT]}
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok


def save_tokenizer(tokenizer: PreTrainedTokenizerFast, folder: str | Path) -> None:
    """``tokenizer.save_pretrained(folder)`` with DeepSeek-R1-Distill's ``SAVED_CONFIG`` in tokenizer_config.json."""
    tokenizer.save_pretrained(folder)
    path = Path(folder) / "tokenizer_config.json"
    config = {**json.loads(path.read_text(encoding="utf-8")), **SAVED_CONFIG}
    path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def prompt_text(tokenizer: PreTrainedTokenizerFast, messages: list[dict]) -> str:
    """The templated prompt verl generates from (generation prompt appended)."""
    return tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)


def prompt_variants(messages: list[dict], extra_info: dict) -> list[str]:
    """The user text as the recipe's data writes it and, for Reasoning Gym, as the evaluation protocol does
    (``evaluation.datasets.rg_prompt``), so that the checkpoint answers in tags under both."""
    from brorl_lib.evaluation.datasets import rg_prompt
    from brorl_lib.verl_recipe.codec import decode_entry

    texts = [messages[-1]["content"]]
    if extra_info.get("entry"):
        texts.append(rg_prompt(decode_entry(extra_info["entry"])["question"]))
    return texts


def target_text(ground_truth: str, family: str = "reasoning_gym") -> str:
    """What the warm start teaches, then the end of the turn: the answer in ProRL's Reasoning Gym tags, or in
    ``\\boxed{}`` for math (the recipe's math instruction)."""
    answer = f"\\boxed{{{ground_truth}}}" if family == "math" else f"<answer>{ground_truth}</answer>"
    return answer + EOS


def sft_batch(tokenizer: PreTrainedTokenizerFast, prompts: list[str], targets: list[str]) -> dict[str, torch.Tensor]:
    """Left-padded ids and attention mask; labels only on the target tokens."""
    enc = [tokenizer(p + t, add_special_tokens=False)["input_ids"] for p, t in zip(prompts, targets)]
    lens = [len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in targets]
    width = max(map(len, enc))
    ids = torch.full((len(enc), width), tokenizer.pad_token_id)
    mask = torch.zeros_like(ids)
    labels = torch.full_like(ids, IGNORE)
    for i, (e, n) in enumerate(zip(enc, lens)):
        ids[i, width - len(e) :] = torch.tensor(e)
        mask[i, width - len(e) :] = 1
        labels[i, width - n :] = ids[i, width - n :]
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def warm_start(
    train: pd.DataFrame,
    out_dir: Path,
    steps: int = 300,
    batch_size: int = 16,
    lr: float = 3e-3,
    seed: int = 0,
    shape: TinyModelShape = CPU_RUN_SHAPE,
    progress: bool = True,
    responses: dict[str, str] | None = None,
) -> Path:
    """Train a fresh tiny model on ``train`` (verl parquet rows) and save it, with its tokenizer, to ``out_dir``.
    A row whose data_source is in ``responses`` is taught that response instead of its ground truth
    (``reward_rows``).

    Our choices: AdamW at ``lr`` on random mini-batches, ``steps`` steps; same seed, same weights.
    """
    if train.empty:
        raise ValueError("train is empty: the warm start needs training rows")
    tokenizer = build_tokenizer()
    model = build_model(shape, tokenizer, seed)
    prompts, targets = [], []
    responses = responses or {}
    for source, messages, extra, reward in zip(
        train["data_source"], train["prompt"], train["extra_info"], train["reward_model"]
    ):
        taught = responses[source] + EOS if source in responses else None
        for text in prompt_variants(messages, extra):
            prompts.append(prompt_text(tokenizer, [{"role": "user", "content": text}]))
            targets.append(taught or target_text(reward["ground_truth"], extra.get("family", "reasoning_gym")))
    train_sft(
        model,
        len(prompts),
        lambda pick, _gen: sft_batch(tokenizer, [prompts[i] for i in pick], [targets[i] for i in pick]),
        steps,
        batch_size,
        lr,
        seed,
        progress,
    )
    model.eval()

    def save(tmp: Path) -> None:
        model.save_pretrained(tmp)
        save_tokenizer(tokenizer, tmp)

    atomic.write_folder(Path(out_dir), save)
    return Path(out_dir)
