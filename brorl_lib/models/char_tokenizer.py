"""A character-level tokenizer built locally with `tokenizers`, saved in Hugging Face format.

Characters are stored in GPT-2's byte-level form (a space is ``Ġ``), as Qwen2's own tokenizer stores
them: transformers 5 (and so vLLM) loads any Qwen2 checkpoint's tokenizer as ``Qwen2Tokenizer``, which
rebuilds a byte-level tokenizer from the vocabulary, and in this form it gives the same ids as
tokenizer.json itself on every text of ALPHABET's characters. (A character outside ALPHABET is
``<unk>`` here; ``Qwen2Tokenizer`` drops it.) The ids are those of the plain character form.
"""

from __future__ import annotations

import string

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>", "<unk>")
# Every character the task prompts and answers use: letters, digits, space and arithmetic/list punctuation.
ALPHABET = string.ascii_letters + string.digits + " +-*/=(),.'[]:"
_BYTE_LEVEL = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)


def byte_level(text: str) -> str:
    """``text`` in GPT-2's byte-level alphabet (each UTF-8 byte as one printable character)."""
    return "".join(piece for piece, _ in _BYTE_LEVEL.pre_tokenize_str(text))


def build_tokenizer() -> PreTrainedTokenizerFast:
    """One token per character of ALPHABET plus the special tokens; decoding concatenates characters."""
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for ch in ALPHABET:
        vocab[byte_level(ch)] = len(vocab)
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    # one piece per character (a run of line breaks, which "." does not match, stays one <unk>), then bytes
    core.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex("."), behavior="isolated"), _BYTE_LEVEL])
    core.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<pad>",
        bos_token="<bos>",
        eos_token="<eos>",
        unk_token="<unk>",
        padding_side="left",
    )
