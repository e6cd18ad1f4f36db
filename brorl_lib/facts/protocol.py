"""The paper's evaluation protocol as defaults, and the sampling parameters every backend takes: the
evaluation's (Tables 3-5) and notebook 04's held-out pass@1.

Sources: BroRL Appendix D evaluates "pass@1 at 32k context, averaged
over 16 independent samples per instance, top-p = 0.95, temperature = 0.6"; ProRL, whose protocol
BroRL follows, caps the response at 32k tokens and evaluates Reasoning Gym on 100 held-out samples
per task (docs/prorl-background.md#prorl-evaluation). The paper's settings are read from data/paper/settings.csv.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from brorl_lib.core.validation import check_int, check_positive, check_range, check_type
from brorl_lib.facts.reported import setting

SAMPLES_PER_INSTANCE: int = setting("eval_samples_per_instance")  # Appendix D: samples per instance
TEMPERATURE: float = setting("eval_temperature")  # Appendix D
TOP_P: float = setting("eval_top_p")  # Appendix D
MAX_RESPONSE_TOKENS: int = setting("eval_context_tokens")  # Appendix D "32k context"; ProRL: "max response 32k"
# Not in the paper: ProRL's "100 held-out samples per task" (docs/prorl-background.md#prorl-evaluation).
RG_INSTANCES_PER_TASK = 100


@dataclass(frozen=True)
class SamplingParams:
    """What each backend samples with: ``n`` responses per prompt, nucleus sampling, a token cap.

    The defaults are the paper's protocol; tests use tiny values. Notebook 04 gives its own response cap and
    measures pass@1 exactly at ``temperature`` and ``top_p`` (``n`` then unused).
    """

    n: int = SAMPLES_PER_INSTANCE  # responses per prompt
    temperature: float = TEMPERATURE  # softmax temperature, > 0; 0: greedy decoding (top_p unused)
    top_p: float = TOP_P  # nucleus mass, in (0, 1]
    max_tokens: int = MAX_RESPONSE_TOKENS  # response length cap, in tokens

    def __post_init__(self) -> None:
        check_int("samples (n)", self.n, low=1)
        check_type("temperature", self.temperature, (int, float), "a number > 0, or 0 for greedy decoding")
        if self.temperature != 0:
            check_positive("temperature", self.temperature)  # finite too: inf would sample uniformly
        check_range("top_p", self.top_p, low=0.0, high=1.0)
        if self.top_p == 0:
            raise ValueError("top_p=0 is not allowed: must be in (0, 1]")
        check_int("max_tokens", self.max_tokens, low=1)

    @property
    def greedy(self) -> bool:
        """Greedy decoding (temperature 0): every one of the ``n`` responses is the most likely one."""
        return self.temperature == 0

    def as_dict(self) -> dict:
        return asdict(self)

    def matches_paper(self) -> bool:
        """True when these are the paper's settings (16 samples, T=0.6, top-p 0.95, 32k tokens)."""
        return self == SamplingParams()
