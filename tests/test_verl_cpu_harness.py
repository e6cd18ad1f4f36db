"""The CPU harness for verl's trainer, piece by piece (fast; the end-to-end runs are in tests/verl_cpu/)."""

from __future__ import annotations

import asyncio
import types

import pytest
import torch

from brorl_lib.verl_recipe import guard, record
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
    assert arms["brorl"].rollouts > arms["prorl"].rollouts
    lr = {a: float(profile.delta(a, profile.CpuSettings())["actor_rollout_ref.actor.optim.lr"][0]) for a in arms}
    ratio = arms["brorl"].samples_per_step / arms["prorl"].samples_per_step
    assert lr["brorl"] / lr["prorl"] == pytest.approx(ratio**0.5)


class FakeBuffer:
    """What guard.bounded needs of verl's ReplayBuffer: a refill that never yields a full batch."""

    filter_groups_metric = "acc"
    train_batch_size = 4

    def __init__(self):
        self.refilled = 0
        self.refill_fn = self._refill

    def _refill(self, count):
        self.refilled += count

    def sample(self, global_steps, partition_id, batch_size):
        while True:  # verl 0.9.1: refills until the batch is full, however long that takes
            self.refill_fn(2)


def test_guard_stops_dynamic_sampling_after_the_round_cap():
    buf = FakeBuffer()
    bounded = guard.bounded(FakeBuffer.sample, 3, "acc")
    with pytest.raises(guard.DynamicSamplingExhausted, match="max_num_gen_batches=3"):
        bounded(buf, 1, "train", 4)
    assert buf.refilled == 2 * buf.train_batch_size  # rounds 2 and 3; the first round is the step's own
    assert buf.refill_fn == buf._refill  # restored


def test_guard_leaves_validation_alone():
    buf = FakeBuffer()
    buf.sample = lambda *a: "validated"
    assert guard.bounded(lambda self, *a: "validated", 1, "acc")(buf, 1, "val", 4) == "validated"


def test_tokenizer_carries_the_chat_template_tokens():
    tok = tiny_model.build_tokenizer()
    assert len(tok.encode("\n", add_special_tokens=False)) == 1
    assert tok.convert_tokens_to_ids(tiny_model.IM_END) == tok.eos_token_id
    text = tiny_model.prompt_text(tok, [{"role": "user", "content": "Who? é"}])
    assert text.endswith("<|im_start|>assistant\n")
    assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tok = tiny_model.build_tokenizer()
    torch.manual_seed(0)
    model = tiny_model.Qwen2ForCausalLM(tiny_model.TinyShape(max_positions=64).config(tok))
    path = tmp_path_factory.mktemp("tiny")
    model.save_pretrained(path)
    tok.save_pretrained(path)
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
