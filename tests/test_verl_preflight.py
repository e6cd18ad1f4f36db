"""python -m brorl_lib.verl_recipe.preflight: each check on this CPU machine, in seconds."""

import importlib.util
import json
from collections import namedtuple

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from brorl_lib.models import deepseek_tokenizer, qwen2
from brorl_lib.verl_recipe import configs, data, preflight, tokenizer_fallback

STORAGE = preflight.STORAGE_KEY
ALL_BUT = lambda *keep: ",".join(c for c in preflight.CHECKS if c not in keep)  # noqa: E731
# DeepSeek-R1-Distill-Qwen-1.5B's shape (the start model's), from its config.json
R1_DISTILL_1_5B = dict(
    hidden_size=1536,
    num_hidden_layers=28,
    intermediate_size=8960,
    vocab_size=151936,
    num_attention_heads=12,
    num_key_value_heads=2,
    tie_word_embeddings=False,
)


def plan(name="brorl", modules=tokenizer_fallback.MODULE, **overrides) -> preflight.ArmPlan:
    ov = {"actor_rollout_ref.rollout.n": "8", "data.train_batch_size": "4", **overrides}
    return preflight.ArmPlan(name, ov, modules, f"{name}/launch.sh")


def save_model_folder(path, chat_template=True, model_type="qwen2"):
    """A tokenizer with DeepSeek-R1-distill's special tokens (no ChatML) and a tiny Qwen2 config.json."""
    tok = deepseek_tokenizer.build_tokenizer()
    if not chat_template:
        tok.chat_template = None
    tok.save_pretrained(path)
    # as DeepSeek-R1-Distill-Qwen's tokenizer_config.json: no unknown token (else transformers' Qwen2Tokenizer,
    # which it loads for model_type qwen2, adds <|endoftext|> as one, and <|im_end|> resolves to it)
    tok_config = json.loads((path / "tokenizer_config.json").read_text())
    tok_config.update(unk_token=None, tokenizer_class="LlamaTokenizerFast")
    (path / "tokenizer_config.json").write_text(json.dumps(tok_config))
    shape = dict(hidden_size=8, num_hidden_layers=1, intermediate_size=16, num_attention_heads=2)
    (path / "config.json").write_text(json.dumps({"model_type": model_type, "vocab_size": len(tok), **shape}))
    return path


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return save_model_folder(tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("data")
    train, val = data.reasoning_gym_frames(["countdown"], 3, 2, 0)
    data.write_parquet(train, folder / "train.parquet")
    data.write_parquet(val, folder / "val.parquet")
    return folder


def test_overrides_parse_plus_keys_and_quoted_values():
    ov = preflight.parse_overrides(["+a.b=pool", "c='/x y/z'", '++d="1"', "", "# note", "e=[console,file]"])
    assert ov == {"a.b": "pool", "c": "/x y/z", "d": "1", "e": "[console,file]"}
    assert preflight.setting(ov, "d") == 1 and preflight.setting({}, "trainer.max_actor_ckpt_to_keep") is None


def test_committed_records_are_read_for_each_profile():
    brorl = preflight.read_plan("brorl")
    n, p = configs.PAPER_ARMS["brorl"]
    assert preflight.setting(brorl.overrides, "actor_rollout_ref.rollout.n") == n
    assert preflight.setting(brorl.overrides, "data.train_batch_size") == p
    assert brorl.source == "recipes/brorl/brorl/launch.sh" and brorl.modules
    cpu = preflight.read_plan("prorl", "cpu")
    assert preflight.setting(cpu.overrides, "trainer.device") == "cpu"


def test_deepseek_tokenizer_crashes_verl_unpatched_and_passes_through_the_fallback(model_dir):
    from transformers import AutoTokenizer
    from verl.utils.tokenizer import continuous_token_wiring

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    create = continuous_token_wiring.create_continuous_token_builder
    create = getattr(create, "__wrapped__", create)  # verl's own, whether or not the fallback is installed
    with pytest.raises(ValueError, match="<\\|im_end\\|>"):
        create(tok, hf_model_type="qwen2")
    r = preflight.check_tokenizer(str(model_dir), [plan()])
    assert r.ok, r
    assert "DeepSeek" in r.detail


def test_tokenizer_failures_name_model_path_the_template_and_the_launch_script(tmp_path, model_dir):
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "config.json").write_text('{"model_type": "qwen2"}')
    r = preflight.check_tokenizer(str(bare), [plan()])
    assert not r.ok and "MODEL_PATH" in r.detail and "no tokenizer files" in r.detail and "--revision" in r.fix
    plain = save_model_folder(tmp_path / "plain", chat_template=False)
    r = preflight.check_tokenizer(str(plain), [plan()])
    assert not r.ok and "no chat template" in r.detail
    r = preflight.check_tokenizer(str(model_dir), [plan(modules="brorl_lib.verl_recipe.guard")])
    assert not r.ok and "brorl/launch.sh" in r.detail and tokenizer_fallback.MODULE in r.detail


def test_storage_below_n_times_p_fails_naming_the_key_and_null_passes():
    small = preflight.check_storage(plan(**{STORAGE: "31"}))  # N x P = 32
    assert not small.ok and STORAGE in small.detail and "one step does not fit" in small.detail
    assert STORAGE in small.fix and "null" in small.fix
    assert not preflight.check_storage(plan(**{STORAGE: "95"})).ok  # our rule: 3 x N x P = 96
    assert preflight.check_storage(plan(**{STORAGE: "96"})).ok
    assert preflight.check_storage(plan(**{STORAGE: "null"})).ok
    big = plan(**{"actor_rollout_ref.rollout.n": "512", "data.train_batch_size": "128"})
    r = preflight.check_storage(big)  # verl's default cap, read from verl's transfer_queue.yaml
    assert not r.ok and "=100000 (verl's default)" in r.detail


def test_data_passes_on_the_recipes_parquet_and_fails_on_a_missing_file(data_dir, tmp_path):
    r = preflight.check_data(str(data_dir))
    assert r.ok and "train.parquet 3 rows" in r.detail
    (tmp_path / "train.parquet").write_bytes((data_dir / "train.parquet").read_bytes())
    r = preflight.check_data(str(tmp_path))
    assert not r.ok and "val.parquet" in r.detail and "does not exist" in r.detail
    assert not preflight.check_data("").ok


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="checks a machine without the GPU extra")
def test_packages_fail_naming_flash_attn_and_vllm_on_a_cpu_machine():
    r = preflight.check_packages()
    assert not r.ok and "flash_attn MISSING (pin 2.8.3)" in r.detail and "vllm MISSING (pin 0.24.0)" in r.detail
    assert "verl 0.9.1 (pin 0.9.1)" in r.detail and "transfer_queue 0.1.11 (pin 0.1.11)" in r.detail
    assert r.fix.startswith('pip install -e ".[gpu]"')


@pytest.mark.skipif(importlib.util.find_spec("flash_attn") is not None, reason="checks a machine without flash_attn")
def test_remove_padding_needs_flash_attn_unless_sdpa():
    r = preflight.check_attention(plan(**{"actor_rollout_ref.model.use_remove_padding": "true"}))
    assert not r.ok and "attn_implementation=sdpa" in r.fix
    sdpa = {"actor_rollout_ref.model.override_config.attn_implementation": "sdpa"}
    assert preflight.check_attention(plan(**{"actor_rollout_ref.model.use_remove_padding": "true", **sdpa})).ok
    assert preflight.check_attention(plan(**{"actor_rollout_ref.model.use_remove_padding": "false"})).ok


@pytest.mark.parametrize("tie", [True, False])
def test_parameter_count_is_qwen2s(tie):
    cfg = dict(R1_DISTILL_1_5B, hidden_size=16, intermediate_size=24, vocab_size=50, num_hidden_layers=2)
    cfg["num_attention_heads"], cfg["tie_word_embeddings"] = 4, tie
    model = Qwen2ForCausalLM(Qwen2Config(**cfg))
    assert qwen2.parameter_count(cfg) == sum(p.numel() for p in model.parameters())


def test_a_checkpoint_of_the_start_model_is_about_21_gb():
    params = qwen2.parameter_count(R1_DISTILL_1_5B)
    assert round(params / 1e9, 2) == 1.78 and round(params * preflight.CKPT_BYTES_PER_PARAM / 1e9) == 21


def test_kept_checkpoints_are_table1_stops_plus_what_verl_keeps():
    steps = {"trainer.total_training_steps": "191", "trainer.save_freq": "10"}
    assert preflight.kept_checkpoints(plan(**steps, **{"trainer.max_actor_ckpt_to_keep": "1"})) == 3 + 1
    assert preflight.kept_checkpoints(plan(**steps)) == 3 + 191 // 10 + 1  # null: every save


def test_disk_fails_saying_how_much_and_which_key(model_dir, monkeypatch, tmp_path):
    steps = {"trainer.total_training_steps": "6", "trainer.save_freq": "2", "trainer.max_actor_ckpt_to_keep": "1"}
    assert preflight.check_disk(str(model_dir), str(tmp_path / "not" / "yet"), [plan(**steps)]).ok
    monkeypatch.setattr(preflight.shutil, "disk_usage", lambda _: namedtuple("U", "total used free")(1, 1, 0))
    r = preflight.check_disk(str(model_dir), str(tmp_path), [plan(**steps)])
    assert not r.ok and "needs" in r.detail and "trainer.max_actor_ckpt_to_keep" in r.fix


def test_driver_memory_fails_with_the_numbers():
    lengths = {"data.max_prompt_length": "100", "data.max_response_length": "900"}
    need = 8 * 4 * 1000 * (4 * 8 + 3 * 4)
    assert preflight.check_driver_memory(plan(**lengths), available=need).ok
    r = preflight.check_driver_memory(plan(**lengths), available=need - 1)
    assert not r.ok and "8 x 4 x 1000 tokens" in r.detail and "data.max_response_length" in r.fix


def test_ray_without_a_cluster_fails_fast_unless_one_node(monkeypatch, tmp_path):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    r = preflight.check_ray(2, 8, address_file=tmp_path / "ray_current_cluster")
    assert not r.ok and "ray start --head" in r.fix
    assert preflight.check_ray(1, 8, address_file=tmp_path / "ray_current_cluster").ok


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without GPUs")
def test_gpu_count_against_n_gpus_per_node():
    r = preflight.check_gpu(1)
    assert not r.ok and "0 CUDA GPU(s), trainer.n_gpus_per_node=1" in r.detail
    assert preflight.check_gpu(1, device="cpu").ok  # the cpu profile


def test_revision_compared_when_the_folder_records_it(tmp_path):
    assert preflight.check_revision(str(tmp_path)).ok  # nothing recorded: passes with the download command
    meta = tmp_path / ".cache" / "huggingface" / "download"
    meta.mkdir(parents=True)
    (meta / "config.json.metadata").write_text("0" * 40 + "\netag\n1.0\n")
    r = preflight.check_revision(str(tmp_path))
    assert not r.ok and configs.MODEL_REVISION in r.fix and "--revision" in r.fix
    (meta / "config.json.metadata").write_text(configs.MODEL_REVISION + "\netag\n1.0\n")
    assert preflight.check_revision(str(tmp_path)).ok


def test_cli_exit_status_and_table(data_dir, tmp_path, capsys):
    assert preflight.main(["--data-dir", str(data_dir), "--skip", ALL_BUT("data")]) == 0
    assert preflight.main(["--data-dir", str(tmp_path), "--skip", ALL_BUT("data", "storage")]) == 1
    out = capsys.readouterr().out
    assert "PASS  data" in out and "FAIL  data" in out and "fix: DATA_DIR must hold" in out
    assert "storage[prorl]" in out and "storage[brorl]" in out and "check(s) failed" in out
    with pytest.raises(SystemExit):
        preflight.main(["--skip", "nonsense"])
