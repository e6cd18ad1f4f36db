"""What verl imports in every process (``VERL_USE_EXTERNAL_MODULES``) to run on a CPU; inert elsewhere.

With ``VERL_PLATFORM=cpu`` set, importing this module

* registers the ``cpu`` platform (``platform.CPUPlatform``) and the ``hf`` rollout (``rollout``);
* applies the two replacements verl 0.9.1 needs on a CPU, each checked against the pinned verl
  (``check_targets``) so that an upgrade that changes the code they stand in for fails loudly:

  1. ``gloo_process_group`` for ``initialize_global_process_group_ray`` (``verl/utils/distributed.py``,
     imported by name in ``verl/workers/engine_workers.py``): verl builds the backend
     ``"cpu:gloo,{device}:{nccl backend}"``, which for device cpu is ``"cpu:gloo,cpu:gloo"``, and torch
     refuses it ("Duplicate device type cpu"). The replacement initialises plain gloo.
  2. ``unpinned_offload_policy`` for ``CPUOffloadPolicy`` in ``verl/workers/engine/fsdp/transformer_impl.py``:
     the FSDP2 reference model is built with ``CPUOffloadPolicy(pin_memory=True)``, and pinning memory
     needs an accelerator. The replacement builds it with ``pin_memory=False``.

The FSDP engine is registered for devices cuda and npu only; the launch selects it with
``VERL_ENGINE_DEVICE=cuda`` (verl's own override, ``workers/engine/base.py``), so no replacement is needed.
"""

from __future__ import annotations

import inspect
import os
from datetime import timedelta

VERL_VERSION = "0.9.1"  # the version these replacements were written against
# (module, the text the replacement stands in for): what check_targets looks for in the pinned verl
TARGETS = {
    "gloo_process_group": ("verl.utils.distributed", 'backend or f"cpu:gloo,{get_device_name()}:{get_nccl_backend()}"'),
    "unpinned_offload_policy": ("verl.workers.engine.fsdp.transformer_impl", "CPUOffloadPolicy(pin_memory=True)"),
}


def check_targets() -> None:
    """RuntimeError unless the installed verl is the pinned one and still holds the code replaced here."""
    import importlib

    import verl

    if verl.__version__ != VERL_VERSION:
        raise RuntimeError(
            f"brorl_lib.verl_recipe.cpu was written for verl {VERL_VERSION}, found {verl.__version__}: "
            "re-check the replacements in brorl_lib/verl_recipe/cpu/plugin.py"
        )
    for name, (module, text) in TARGETS.items():
        source = inspect.getsource(importlib.import_module(module))
        if text not in source:
            raise RuntimeError(f"{module} no longer contains {text!r}: the replacement {name} may be wrong or unneeded")


def gloo_process_group(timeout_second=None, backend=None) -> None:
    """``initialize_global_process_group_ray`` with the gloo backend alone (replacement 1)."""
    import torch.distributed

    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group(
            backend="gloo",
            rank=int(os.environ.get("RANK", 0)),
            world_size=int(os.environ.get("WORLD_SIZE", 1)),
            timeout=timedelta(seconds=timeout_second) if timeout_second is not None else None,
            init_method=os.environ.get("DIST_INIT_METHOD", None),
        )


def unpinned_offload_policy(pin_memory: bool = True):
    """FSDP2's ``CPUOffloadPolicy`` without pinned memory (replacement 2)."""
    from torch.distributed.fsdp import CPUOffloadPolicy

    return CPUOffloadPolicy(pin_memory=False)


ROLLOUT_MODULE = "brorl_lib.verl_recipe.cpu.rollout"  # imported lazily: it imports verl, which imports this


def _load_replica():
    import importlib

    return importlib.import_module(ROLLOUT_MODULE).HFReplica


def install() -> None:
    """Register the platform (first: verl modules ask for it at import) and the rollout; apply both replacements."""
    from verl.plugin.platform.platform_manager import PlatformRegistry

    from brorl_lib.verl_recipe.cpu.platform import PLATFORM_NAME, CPUPlatform

    if PLATFORM_NAME not in PlatformRegistry.registered_names():
        PlatformRegistry.register(platform=PLATFORM_NAME)(CPUPlatform)
    check_targets()

    from verl.utils import distributed
    from verl.workers import engine_workers
    from verl.workers.engine.fsdp import transformer_impl
    from verl.workers.rollout import base as rollout_base
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    RolloutReplicaRegistry.register("hf", _load_replica)
    rollout_base._ROLLOUT_REGISTRY[("hf", "async")] = f"{ROLLOUT_MODULE}.HFServerAdapter"
    distributed.initialize_global_process_group_ray = gloo_process_group
    engine_workers.initialize_global_process_group_ray = gloo_process_group
    transformer_impl.CPUOffloadPolicy = unpinned_offload_policy


if os.environ.get("VERL_PLATFORM", "").strip().lower() == "cpu":
    install()
