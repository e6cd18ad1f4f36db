"""verl's own trainer on a CPU: a test harness for the recipe, not a training backend.

verl 0.9.1 trains only on GPUs (``main_ppo`` stops at "Total available GPUs 0"). These modules let the
real ``python -m verl.trainer.main_ppo`` (Ray, the V1 trainer, FSDP2, the reward loop, the file logger,
checkpoints, validation) run the committed recipe at toy scale on a CPU, so that data, reward, config,
dynamic sampling, logs, resume, merge and evaluation are proven together before GPU hours are spent.
Nothing here is fast or meant for real training; rollouts come from a transformers copy of the policy.

* ``plugin``: the module verl imports in every process through ``VERL_USE_EXTERNAL_MODULES``; it
  registers the ``cpu`` platform and the ``hf`` rollout and applies the two replacements verl needs.
* ``platform``: the ``cpu`` platform (device "cpu", gloo, the Ray resource verl asks for).
* ``rollout``: the ``hf`` rollout replica: a Ray server actor that samples with transformers, and the
  adapter through which the trainer hands it its weights every step.
* ``tiny_model``: a tiny Qwen2 with ``models.deepseek_tokenizer``, warm-started on the recipe's own
  training prompts.
* ``profile``: the CPU launch profile: the committed arm's overrides plus a short, listed CPU delta.
* ``run``: train both arms through ``main_ppo``, resume, merge a checkpoint, evaluate it.
"""
