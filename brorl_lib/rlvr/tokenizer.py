"""A character-level tokenizer built locally with `tokenizers`, saved in Hugging Face format."""

from __future__ import annotations

import string

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>", "<unk>")
# Every character the task prompts and answers use: letters, digits, space and arithmetic/list punctuation.
ALPHABET = string.ascii_letters + string.digits + " +-*/=(),.'[]:"


def build_tokenizer() -> PreTrainedTokenizerFast:
    """One token per character of ALPHABET plus the special tokens; decoding concatenates characters."""
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for ch in ALPHABET:
        vocab[ch] = len(vocab)
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<pad>",
        bos_token="<bos>",
        eos_token="<eos>",
        unk_token="<unk>",
        padding_side="left",
    )
