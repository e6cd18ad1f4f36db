"""The two tokenizers of ``brorl_lib.models``, each against the files its committed runs carry: a fresh build,
saved, gives the warm start's (start model's) files byte for byte, and every later checkpoint's tokenizer.json
holds the same vocabulary, pieces and decoder (a checkpoint's copy also records the padding it was used with)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.models import char_tokenizer, deepseek_tokenizer

RUNS = REPO_ROOT / "data" / "runs"
SAME_SECTIONS = ("added_tokens", "normalizer", "pre_tokenizer", "post_processor", "decoder", "model")


def committed(pattern: str) -> list[Path]:
    """Every tracked file under data/runs matching ``pattern`` (a git pathspec glob)."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--", f"data/runs/{pattern}"], cwd=REPO_ROOT, capture_output=True, check=True
    ).stdout.decode()
    return [REPO_ROOT / p for p in out.split("\0") if p]


def built(tmp_path: Path, which: str) -> Path:
    folder = tmp_path / which
    if which == "char":
        char_tokenizer.build_tokenizer().save_pretrained(folder)
    else:
        deepseek_tokenizer.save_tokenizer(deepseek_tokenizer.build_tokenizer(), folder)
    return folder


def test_the_character_tokenizer_rebuilds_every_committed_warm_start_byte_for_byte(tmp_path):
    fresh = built(tmp_path, "char")
    folders = {p.parent for p in committed("*/warm_start/tokenizer.json")}
    assert len(folders) >= 10, folders  # every laptop study's configurations
    for folder in folders:
        for name in ("tokenizer.json", "tokenizer_config.json"):
            assert (folder / name).read_bytes() == (fresh / name).read_bytes(), folder / name


def test_every_committed_checkpoint_carries_the_character_tokenizer(tmp_path):
    fresh = json.loads((built(tmp_path, "char") / "tokenizer.json").read_text())
    checkpoints = committed("*/checkpoint/tokenizer.json")
    assert checkpoints
    for path in checkpoints:
        saved = json.loads(path.read_text())
        assert {k: saved[k] for k in SAME_SECTIONS} == {k: fresh[k] for k in SAME_SECTIONS}, path
        assert saved["padding"]["direction"] == "Left" and saved["padding"]["pad_token"] == "<pad>", path


def test_the_deepseek_tokenizer_rebuilds_the_cpu_runs_start_model_byte_for_byte(tmp_path):
    fresh = built(tmp_path, "deepseek")
    start = RUNS / "verl" / "verl-cpu" / "start_model"
    names = sorted(p.name for p in fresh.iterdir())
    assert names == ["chat_template.jinja", "tokenizer.json", "tokenizer_config.json"]
    for name in names:
        assert (start / name).read_bytes() == (fresh / name).read_bytes(), name


@pytest.mark.parametrize("which", ["char", "deepseek"])
def test_each_tokenizer_round_trips_its_texts(which):
    if which == "char":  # one token per character of its alphabet
        tok, text = char_tokenizer.build_tokenizer(), char_tokenizer.ALPHABET
        expected_tokens = len(text)
    else:  # one token per UTF-8 byte of any text
        tok, text = deepseek_tokenizer.build_tokenizer(), "Any text: é, 中, line\nbreaks."
        expected_tokens = len(text.encode())
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == expected_tokens
    assert tok.decode(ids) == text
