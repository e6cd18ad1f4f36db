"""The verl CPU run's tokenizer, of DeepSeek-R1-Distill-Qwen's family: character-level over GPT-2's 256
byte-level characters (any text encodes, one token per byte) plus DeepSeek's special tokens
``<｜begin▁of▁sentence｜>``, ``<｜end▁of▁sentence｜>`` (end of turn and padding, as in the R1 distills),
``<｜User｜>`` and ``<｜Assistant｜>``, with the R1 distills' chat template (the generation prompt opens
``<think>``) and their tokenizer_config.json. Notebook 04's tokenizer is ``char_tokenizer``.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

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
