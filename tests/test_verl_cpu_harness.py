"""The CPU harness for verl's trainer, piece by piece (fast; the end-to-end runs are in tests/verl_cpu/)."""

from __future__ import annotations

import asyncio
import dataclasses
import types

import pytest
import torch
from transformers import AutoTokenizer
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer
from verl.utils.tokenizer import continuous_token_wiring

from brorl_lib.models import deepseek_tokenizer, tiny
from brorl_lib.verl_recipe import configs, guard, record, smoke_metrics, tokenizer_fallback
from brorl_lib.verl_recipe.cpu import plugin, profile, rollout, tiny_model
from brorl_lib.verl_recipe.cpu.platform import CPUDeviceModule, CPUPlatform


def test_replacements_match_the_pinned_verl():
    plugin.check_targets()  # verl 0.9.1 still holds the code each replacement stands in for


def test_replacement_check_fails_loudly_when_verl_changes(monkeypatch):
    monkeypatch.setitem(plugin.TARGETS, "gloo_process_group", ("verl.utils.distributed", "no such line"))
    with pytest.raises(RuntimeError, match="gloo_process_group"):
        plugin.check_targets()


def test_replacements_do_what_they_say():
    policy = plugin.unpinned_offload_policy(pin_memory=True)
    assert policy.pin_memory is False


def test_device_module_answers_what_verl_calls():
    mod = CPUDeviceModule()
    for name in ("empty_cache", "synchronize", "is_available", "current_stream", "set_device", "mem_get_info",
                 "stream", "Stream", "set_rng_state", "set_per_process_memory_fraction", "ipc_collect",
                 "get_rng_state", "device_count", "memory_reserved", "memory_allocated", "max_memory_reserved",
                 "max_memory_allocated", "get_device_name", "Event", "manual_seed_all"):  # fmt: skip
        assert callable(getattr(mod, name)), name
    free, total = mod.mem_get_info()
    assert 0 < free <= total
    state = mod.get_rng_state()
    mod.set_rng_state(state)
    assert CPUPlatform().device_name == "cpu" and CPUPlatform().ray_resource_name() == "GPU"
    assert CPUPlatform().communication_backend_name() == "gloo"


@pytest.mark.parametrize("arm", ["prorl", "brorl"])
def test_cpu_profile_is_the_committed_arm_plus_exactly_the_listed_delta(arm):
    committed = (record.RECORD_DIR / arm / "overrides.txt").read_text().splitlines()
    cpu = (record.RECORD_DIR / "cpu" / arm / "overrides.txt").read_text().splitlines()
    delta = profile.delta(arm, profile.CpuSettings())
    before = {profile.override_key(o): o for o in committed}
    after = {profile.override_key(o): o for o in cpu}
    assert set(before) <= set(after)  # nothing of the recipe is dropped
    changed = {k for k in after if before.get(k) != after[k]}
    assert changed == {k for k, (v, _) in delta.items() if before.get(k) != f"{k}={v}"}
    assert {group for _, group in delta.values()} <= set(profile.DELTA_GROUPS)
    # the recipe's algorithm is untouched
    for key in ("algorithm.adv_estimator", "algorithm.filter_groups.enable", "algorithm.filter_groups.metric",
                "algorithm.filter_groups.max_num_gen_batches", "actor_rollout_ref.actor.clip_ratio_high",
                "actor_rollout_ref.actor.kl_loss_type", "reward.custom_reward_function.path",
                "actor_rollout_ref.rollout.temperature", "trainer.resume_mode"):  # fmt: skip
        assert key not in delta and before[key] == after[key]


def test_cpu_arms_follow_the_papers_prompt_ratio_and_lr_rule():
    arms = profile.cpu_arms(2)
    assert arms["brorl"].prompts_per_step * 4 == arms["prorl"].prompts_per_step
    assert arms["brorl"].n_rollouts > arms["prorl"].n_rollouts
    lr = {a: float(profile.delta(a, profile.CpuSettings())["actor_rollout_ref.actor.optim.lr"][0]) for a in arms}
    ratio = arms["brorl"].samples_per_step / arms["prorl"].samples_per_step
    assert lr["brorl"] / lr["prorl"] == pytest.approx(ratio**0.5)


def bounded_buffer(max_rounds: int, refill) -> guard.BoundedReplayBuffer:
    """The guard as verl's _build_replay_buffer makes a custom sampler: its kwargs, the recipe's sampler_kwargs."""
    return guard.BoundedReplayBuffer(
        trainer_mode="sync",
        trainer_config={},
        max_off_policy_threshold=None,
        max_off_policy_strategy="drop",
        sampler_kwargs={"filter_groups_metric": "acc", "max_num_gen_batches": max_rounds, "train_batch_size": 4},
        refill_fn=refill,
    )


def test_guard_is_verls_buffer_with_the_settings_verl_gives_its_own():
    buf = bounded_buffer(3, lambda n: None)
    assert isinstance(buf, ReplayBuffer)
    assert (buf.filter_groups_metric, buf.train_batch_size, buf.gen_batch_size) == ("acc", 4, 1)
    assert buf.max_inflight_gen_batches == 1 and buf.sampler_kwargs == {}


def test_guard_stops_dynamic_sampling_after_the_round_cap(monkeypatch):
    refilled = []
    buf = bounded_buffer(3, refilled.append)
    original = buf.refill_fn

    def never_full(self, global_steps, partition_id, batch_size):  # verl 0.9.1 refills until the batch is full
        while True:
            self.refill_fn(2)

    monkeypatch.setattr(ReplayBuffer, "sample", never_full)
    with pytest.raises(guard.DynamicSamplingExhausted, match="max_num_gen_batches=3"):
        buf.sample(1, "train", 4)
    assert sum(refilled) == 2 * buf.train_batch_size  # rounds 2 and 3; the first round is the step's own
    assert buf.refill_fn is original  # restored


def test_guard_leaves_validation_and_unbounded_runs_alone(monkeypatch):
    monkeypatch.setattr(ReplayBuffer, "sample", lambda self, *a: ("verl's sample", {"verl": 1}))
    assert bounded_buffer(1, lambda n: None).sample(1, "val", 4) == ("verl's sample", {"verl": 1})
    batch, metrics = bounded_buffer(0, lambda n: None).sample(1, "train", 4)
    assert batch == "verl's sample" and metrics["verl"] == 1 and metrics[smoke_metrics.ROUNDS_KEY] == 1.0


def test_guard_logs_rounds_resident_samples_and_the_task_runners_memory(monkeypatch):
    def refill_twice(self, global_steps, partition_id, batch_size):  # 4 prompts x 2 rollouts held, then 2 refills
        self.partitions["train"] = {f"p{i}_{j}": {} for i in range(4) for j in range(2)}
        self.refill_fn(2)
        self.partitions["train"] |= {f"q{i}_{j}": {} for i in range(2) for j in range(2)}
        self.refill_fn(2)
        self.partitions["train"] = {}  # the batch taken out
        return "batch", {"verl": 1}

    monkeypatch.setattr(ReplayBuffer, "sample", refill_twice)
    _, metrics = bounded_buffer(3, lambda n: None).sample(1, "train", 4)
    assert metrics[smoke_metrics.ROUNDS_KEY] == (4 + 2 + 2) / 4  # prompts generated / data.train_batch_size
    assert metrics[smoke_metrics.RESIDENT_KEY] == 4 * 2 + 2 * 2  # the most keys held, seen at a refill
    assert metrics[smoke_metrics.RSS_KEY] > 0 and metrics[smoke_metrics.NODE_AVAILABLE_KEY] > 0
    assert metrics["verl"] == 1


def test_recipe_hands_the_guard_the_keys_verl_reads():
    cfg = configs.compose(record.profile_arms()["cpu/prorl"][1])
    sampler = cfg.trainer.v1.sampler
    assert sampler.custom_sampler.path == configs.SAMPLER_PATH == f"pkg://{guard.__name__}"
    assert sampler.custom_sampler.name == guard.BoundedReplayBuffer.__name__
    assert dict(sampler.sampler_kwargs) == {
        "filter_groups_enable": cfg.algorithm.filter_groups.enable,
        "filter_groups_metric": cfg.algorithm.filter_groups.metric,
        "max_num_gen_batches": cfg.algorithm.filter_groups.max_num_gen_batches,
        "train_batch_size": cfg.data.train_batch_size,
        "max_inflight_gen_batches": cfg.algorithm.filter_groups.max_inflight_gen_batches,
        "sync_refill_failed_groups": cfg.trainer.v1.sampler.sync_refill_failed_groups,
    }


def _buffer(sampler_kwargs: dict) -> guard.BoundedReplayBuffer:
    """The guard's buffer as verl's sync trainer builds it, from the composed sampler kwargs."""
    return guard.BoundedReplayBuffer(
        trainer_mode="sync",
        trainer_config={},
        max_off_policy_threshold=None,
        max_off_policy_strategy="drop",
        sampler_kwargs=sampler_kwargs,
        refill_fn=lambda n: None,
    )


def test_filter_groups_enable_false_turns_the_guards_filter_off_as_verls_buffer_does():
    ov = record.profile_arms()["cpu/prorl"][1]
    for enable, metric in (("true", "acc"), ("false", None)):
        kwargs = dict(
            configs.compose([*ov, f"algorithm.filter_groups.enable={enable}"]).trainer.v1.sampler.sampler_kwargs
        )
        buf = _buffer(kwargs)
        batch = int(kwargs["train_batch_size"])
        assert (buf.filter_groups_metric, buf.gen_batch_size) == (metric, 1 if metric else batch), enable


def test_inflight_and_refill_keys_reach_the_guard_as_verl_gives_them_its_own_buffer():
    ov = record.profile_arms()["cpu/prorl"][1]
    keys = ["algorithm.filter_groups.max_inflight_gen_batches=3", "trainer.v1.sampler.sync_refill_failed_groups=true"]
    kwargs = dict(configs.compose(ov + keys).trainer.v1.sampler.sampler_kwargs)
    buf = _buffer(kwargs)
    assert (buf.max_inflight_gen_batches, buf.sync_refill_failed_groups, buf.sampler_kwargs) == (3, True, {})


def test_tokenizer_is_deepseek_r1_distill_style():
    tok = deepseek_tokenizer.build_tokenizer()
    assert not tokenizer_fallback.has_token(tok, "<|im_end|>") and not tokenizer_fallback.has_token(tok, "<|im_start|>")
    assert (
        tok.eos_token == deepseek_tokenizer.EOS == tokenizer_fallback.DEEPSEEK_EOS
        and tok.bos_token == deepseek_tokenizer.BOS
    )
    text = tiny_model.prompt_text(tok, [{"role": "system", "content": "S"}, {"role": "user", "content": "Who? é"}])
    assert text == f"{deepseek_tokenizer.BOS}S{deepseek_tokenizer.USER}Who? é{deepseek_tokenizer.ASSISTANT}<think>\n"
    assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text


def test_verl_cannot_build_the_tiny_models_tokenizer_without_the_fallback(tmp_path):
    built = deepseek_tokenizer.build_tokenizer()
    deepseek_tokenizer.save_tokenizer(built, tmp_path)
    tiny_model.CPU_RUN_SHAPE.config(built).save_pretrained(tmp_path)  # config.json: model_type qwen2
    tok = AutoTokenizer.from_pretrained(tmp_path)  # as verl loads it from the model folder
    assert tok.unk_token is None and not tokenizer_fallback.has_token(tok, "<|im_end|>")
    create = continuous_token_wiring.create_continuous_token_builder
    unpatched = getattr(create, "__wrapped__", create)
    with pytest.raises(ValueError, match="im_end"):
        unpatched(tok, hf_model_type="qwen2")
    assert type(tokenizer_fallback.build_builder(tok, "qwen2")).__name__ == "DeepSeekContinuousTokenBuilder"


def test_fallback_leaves_chatml_tokenizers_and_other_models_alone():
    tok = deepseek_tokenizer.build_tokenizer()
    tok.add_special_tokens({"additional_special_tokens": ["<|im_end|>"]})
    assert tokenizer_fallback.fallback_family(tok, "qwen2") is None  # ChatML present: verl's Qwen builder
    assert tokenizer_fallback.fallback_family(deepseek_tokenizer.build_tokenizer(), "llama") is None


def test_fallback_targets_match_the_pinned_verl(monkeypatch):
    tokenizer_fallback.check_targets()
    monkeypatch.setattr(tokenizer_fallback, "TARGETS", ((tokenizer_fallback.WIRING, "no such line"),))
    with pytest.raises(RuntimeError, match="no such line"):
        tokenizer_fallback.check_targets()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tok = deepseek_tokenizer.build_tokenizer()
    model = tiny.build_model(dataclasses.replace(tiny_model.CPU_RUN_SHAPE, max_positions=64), tok, seed=0)
    path = tmp_path_factory.mktemp("tiny")
    model.save_pretrained(path)
    deepseek_tokenizer.save_tokenizer(tok, path)
    cfg = types.SimpleNamespace(prompt_length=16, response_length=6, get=lambda k, d=None: d)
    return rollout.HFServer(cfg, types.SimpleNamespace(local_path=str(path), path=str(path)))


def test_server_batches_requests_and_returns_log_probs(server):
    async def go():
        params = {"temperature": 1.0, "top_p": 0.9, "top_k": -1, "logprobs": True}
        return await asyncio.gather(*[server.generate([5, 6, 7][: 1 + i % 3], dict(params), str(i)) for i in range(6)])

    outs = asyncio.run(go())
    for out in outs:
        assert 1 <= len(out.token_ids) <= 6 and len(out.log_probs) == len(out.token_ids)
        assert all(lp <= 0 for lp in out.log_probs)
        assert out.stop_reason in ("completed", "length")


def test_server_takes_the_trainers_weights_and_refuses_unknown_ones(server):
    state = {k: torch.zeros_like(v) for k, v in server.model.state_dict().items()}
    assert server.load_weights(state, 3) == len(state)
    assert server.global_steps == 3
    assert all(float(v.abs().sum()) == 0 for v in server.model.state_dict().values())
    with pytest.raises(KeyError, match="does not have"):
        server.load_weights({"no.such.weight": torch.zeros(1)})


def test_top_p_keeps_the_smallest_prefix_and_greedy_takes_the_argmax():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    gen = torch.Generator().manual_seed(0)
    drawn = {int(rollout._sample(logits, 1.0, 0.6, -1, gen)[0]) for _ in range(200)}
    assert drawn == {0, 1}
    tok, lp = rollout._sample(logits, 0.0, 1.0, -1, gen)
    assert int(tok) == 0 and float(lp) == pytest.approx(float(torch.log(torch.tensor(0.5))))


def _scripted_launches(monkeypatch, tmp_path, outcomes: list[tuple[int, bytes]]):
    """``launch_mod.launch`` stand-in: each call writes its text to the log and returns its status, in order."""
    from brorl_lib.verl_recipe.cpu import run

    calls = []

    def fake(script, env, extra, timeout_s, log):
        status, text = outcomes[len(calls)]
        calls.append(script)
        log.write(text)
        log.flush()
        return status

    monkeypatch.setattr(run.launch_mod, "launch", fake)
    paths = run.Paths(tmp_path, tmp_path / "runs", tmp_path / "model")
    return run, paths, calls


def test_a_cpu_launch_runs_rays_workers_at_the_callers_priority_unless_told_otherwise(monkeypatch, tmp_path):
    from brorl_lib.verl_recipe.cpu import run

    paths = run.Paths(tmp_path, tmp_path / "runs", tmp_path / "model")
    monkeypatch.delenv("RAY_worker_niceness", raising=False)
    assert paths.env()["RAY_worker_niceness"] == "0"  # Ray's own default: 15
    monkeypatch.setenv("RAY_worker_niceness", "10")
    assert paths.env()["RAY_worker_niceness"] == "10"


def test_a_launch_that_misses_rays_own_start_up_deadline_is_started_again(monkeypatch, tmp_path):
    missed = (1, b"Exception: " + b"The current node timed out during startup. This could happen because ...\n")
    run, paths, calls = _scripted_launches(monkeypatch, tmp_path, [missed, missed, (0, b"trained\n")])
    with open(tmp_path / "a.log", "wb") as log:
        assert run.launch("prorl", paths, log=log) == 0
    assert len(calls) == 3 and (tmp_path / "a.log").read_bytes().count(b"missed its own deadline") == 2

    run, paths, calls = _scripted_launches(monkeypatch, tmp_path, [missed] * run.RAY_START_TRIES)
    with open(tmp_path / "b.log", "wb") as log:
        assert run.launch("prorl", paths, log=log) == 1  # at most RAY_START_TRIES, then its status
    assert len(calls) == run.RAY_START_TRIES

    run, paths, calls = _scripted_launches(monkeypatch, tmp_path, [(1, b"ValueError: a real failure\n"), missed])
    with open(tmp_path / "c.log", "wb") as log:
        assert run.launch("prorl", paths, log=log) == 1  # any other failure is the result: never retried
    assert len(calls) == 1


def test_a_killed_launch_that_missed_rays_start_up_is_started_again(monkeypatch, tmp_path):
    from brorl_lib.verl_recipe.cpu import run

    calls = []

    def fake(script, env, checkpoints, after_step, extra, timeout_s, log, log_dir):
        calls.append(after_step)
        if len(calls) == 1:
            log.write(run.RAY_START_MISSED + b"\n")
            log.flush()
            raise RuntimeError("launch.sh ended (status 1) before checkpoint 1")

    monkeypatch.setattr(run.launch_mod, "launch_and_kill", fake)
    with open(tmp_path / "k.log", "wb") as log:
        run.launch_and_kill("prorl", run.Paths(tmp_path, tmp_path / "runs", tmp_path / "m"), after_step=1, log=log)
    assert calls == [1, 1]
