"""verl's ``cpu`` platform: device "cpu", gloo, and the Ray resource verl asks for.

verl 0.9.1 registers nvidia, huawei and amd platforms only and falls back to nvidia (device cuda,
backend nccl) when none is found (``verl/plugin/platform/platform_manager.py``). This one is selected by
``VERL_PLATFORM=cpu``. verl calls ``torch.cuda``-style functions on the platform's device module
(``empty_cache``, ``memory_allocated``, ``mem_get_info``, RNG state, ``manual_seed_all``, ...):
``CPUDeviceModule`` answers them for the CPU. verl's Ray worker groups ask for a "GPU" resource
(``single_controller/ray/base.py`` hard-codes ``use_gpu=True``), so the platform reports "GPU" as its Ray
resource and the launch declares logical GPUs with ``+ray_kwargs.ray_init.num_gpus``.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

import torch
from verl.plugin.platform.platform_base import PlatformBase

PLATFORM_NAME = "cpu"


class CPUDeviceModule:
    """The ``torch.cuda`` calls verl makes, answered for the CPU (memory figures from /proc/meminfo)."""

    def __getattr__(self, name: str) -> Any:  # everything torch.cpu has (Stream, synchronize, ...)
        return getattr(torch.cpu, name)

    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def current_device() -> str:
        return "cpu"  # verl passes it to torch as a device

    @staticmethod
    def device_count() -> int:
        return 1

    @staticmethod
    def set_device(device: Any) -> None:
        return None

    @staticmethod
    def get_device_name(device: Any = None) -> str:
        return "CPU"  # verl's flops counter then reports no peak flops (MFU 0)

    @staticmethod
    def empty_cache() -> None:
        return None

    ipc_collect = empty_cache

    @staticmethod
    def set_per_process_memory_fraction(fraction: float, device: Any = None) -> None:
        return None

    @staticmethod
    def memory_allocated(device: Any = None) -> int:
        return 0

    memory_reserved = max_memory_allocated = max_memory_reserved = memory_allocated

    @staticmethod
    def reset_peak_memory_stats(device: Any = None) -> None:
        return None

    @staticmethod
    def mem_get_info(device: Any = None) -> tuple[int, int]:
        """(free, total) bytes of system memory."""
        info = {}
        with open("/proc/meminfo") as f:
            for line in f:
                key, value = line.split(":", 1)
                info[key] = int(value.split()[0]) * 1024
        return info.get("MemAvailable", info["MemFree"]), info["MemTotal"]

    @staticmethod
    def manual_seed(seed: int) -> None:
        torch.manual_seed(seed)

    manual_seed_all = manual_seed

    @staticmethod
    def get_rng_state(device: Any = None) -> torch.Tensor:
        return torch.get_rng_state()

    @staticmethod
    def set_rng_state(state: torch.Tensor, device: Any = None) -> None:
        torch.set_rng_state(state)

    @staticmethod
    def is_bf16_supported(including_emulation: bool = True) -> bool:
        return True


class CPUPlatform(PlatformBase):
    """The platform verl sees when ``VERL_PLATFORM=cpu``."""

    device_module_instance = CPUDeviceModule()

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> CPUDeviceModule:
        return self.device_module_instance

    def is_available(self) -> bool:
        return True

    def current_device(self) -> str:  # verl uses the value as a torch device
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"  # Ray sets it for the logical GPUs; nothing reads it on a CPU

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "GPU"  # verl's worker groups request GPUs; the launch declares logical ones

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None
