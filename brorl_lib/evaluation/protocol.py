"""The paper's evaluation protocol as defaults, and the sampling parameters every backend takes.

Sources (see paper-notes §3.3 and §7.1): BroRL Appendix D evaluates "pass@1 at 32k context, averaged
over 16 independent samples per instance, top-p = 0.95, temperature = 0.6"; ProRL, whose protocol
BroRL follows, caps the response at 32k tokens and evaluates Reasoning Gym on 100 held-out samples
per task.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from brorl_lib.core.validation import check_int, check_range, check_type

SAMPLES_PER_INSTANCE = 16  # paper-notes §3.3: "averaged over 16 independent samples per instance"
TEMPERATURE = 0.6  # paper-notes §3.3
TOP_P = 0.95  # paper-notes §3.3
MAX_RESPONSE_TOKENS = 32768  # paper-notes §3.3 "32k context"; ProRL (§7.1): "max response 32k"
RG_INSTANCES_PER_TASK = 100  # paper-notes §7.1: ProRL's "100 held-out samples per task"
# Bumped whenever a prompt template or answer extraction changes, so old results are not mixed in.
PROMPT_VERSION = 1


@dataclass(frozen=True)
class SamplingParams:
    """What each backend samples with: ``n`` responses per prompt, nucleus sampling, a token cap.

    The defaults are the paper's protocol; tests use tiny values.
    """

    n: int = SAMPLES_PER_INSTANCE  # responses per prompt
    temperature: float = TEMPERATURE  # softmax temperature, > 0 (no greedy decoding here)
    top_p: float = TOP_P  # nucleus mass, in (0, 1]
    max_tokens: int = MAX_RESPONSE_TOKENS  # response length cap, in tokens

    def __post_init__(self) -> None:
        check_int("samples (n)", self.n, low=1)
        check_type("temperature", self.temperature, (int, float), "a number > 0")
        if not self.temperature > 0:
            raise ValueError(f"temperature={self.temperature!r} is not allowed: must be > 0")
        check_range("top_p", self.top_p, low=0.0, high=1.0)
        if self.top_p == 0:
            raise ValueError("top_p=0 is not allowed: must be in (0, 1]")
        check_int("max_tokens", self.max_tokens, low=1)

    def as_dict(self) -> dict:
        return asdict(self)

    def matches_paper(self) -> bool:
        """True when these are the paper's settings (16 samples, T=0.6, top-p 0.95, 32k tokens)."""
        return self == SamplingParams()
