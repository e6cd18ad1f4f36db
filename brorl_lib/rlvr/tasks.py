"""Verifiable task families from `reasoning_gym`, with compact prompts for a character-level model.

The model sees a short prompt made from each entry's metadata ("7+5=", "rev neon=", "wsr free may=")
and answers in the task's own format, without tags. ``score`` is the task's own verifier on the whole
response (``brorl_lib.tasks.verifiers.answer_score``), never a string match of our own; the RL reward
(``reward``) is binary, as in RLVR and Theorem 1: 1 when that score is full credit, else 0.
Entries come from ``brorl_lib.tasks.generation``. Train and test instances are disjoint (no test
prompt occurs among the training prompts).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from brorl_lib.core.validation import check_choice, check_int
from brorl_lib.models.char_tokenizer import ALPHABET
from brorl_lib.tasks.credit import passed
from brorl_lib.tasks.generation import EntryRequest, generate
from brorl_lib.tasks.verifiers import answer_score


@dataclass(frozen=True)
class TaskFamily:
    dataset: str  # reasoning_gym dataset name
    tag: str  # prefix of the compact prompt
    prompt: Callable[[dict], str]  # metadata -> text before "="
    options: Callable[[int], dict]  # difficulty level -> reasoning_gym config
    levels: tuple[int, ...] = field(default=(1, 2, 3))
    answer: Callable[[dict], str] = field(default=lambda e: e["answer"])  # entry -> the reference answer


FAMILIES: dict[str, TaskFamily] = {
    # difficulty: digits per operand
    "arithmetic": TaskFamily(
        "basic_arithmetic",
        "",
        lambda md: md["expression"].replace(" ", ""),
        lambda d: dict(
            min_terms=2,
            max_terms=2,
            min_digits=1,
            max_digits=d,
            operators=("+", "-"),
            allow_parentheses=False,
            allow_negation=False,
        ),
    ),
    # difficulty: word length 3..(2 + d)
    "spell_backward": TaskFamily(
        "spell_backward",
        "rev ",
        lambda md: md["word"],
        lambda d: dict(min_word_len=3, max_word_len=2 + d),
        levels=(1, 2, 3, 4, 5, 6),
    ),
    # difficulty: number of words 2..(1 + d)
    "word_sequence_reversal": TaskFamily(
        "word_sequence_reversal",
        "wsr ",
        lambda md: " ".join(md["words"]),
        lambda d: dict(min_words=2, max_words=1 + d),
    ),
    # difficulty: how many single-digit numbers must all be used, with + and - only ("3,5,1,7:14=" -> "7+5+3-1");
    # every ordering of every valid sign pattern is correct, so the correct mass is spread (brorl_lib.rlvr.correct_set)
    "countdown": TaskFamily(
        "countdown",
        "",
        lambda md: ",".join(str(n) for n in md["numbers"]) + ":" + str(md["target"]),
        lambda d: dict(
            min_numbers=d,
            max_numbers=d,
            min_value=1,
            max_value=9,
            min_target=1,
            max_target=9 * d,
            operators=("+", "-"),
        ),
        levels=(3, 4, 5),
        answer=lambda e: e["answer"].replace(" ", ""),
    ),
}


SEED_STRIDE = 10_000_000  # more instances than any split here asks for


@dataclass(frozen=True)
class LaptopInstance:
    """One prompt of a laptop-scale task family and the entry its verifier checks."""

    task: str  # a key of FAMILIES
    prompt: str  # what the model is given, ends with "="
    answer: str  # the reference answer (for supervised warm start only)
    entry: dict  # the reasoning_gym entry its verifier scores against


def score(instance: LaptopInstance, response: str) -> float:
    """The task's own verifier on the whole (stripped) response, a fraction (1.0 correct; near misses earn
    partial credit; 0.0 wrong)."""
    return answer_score(FAMILIES[instance.task].dataset, response.strip(), instance.entry)


def reward(instance: LaptopInstance, response: str) -> float:
    """The laptop RL reward, binary: 1.0 when the verifier gives full credit (``brorl_lib.tasks.credit``), else 0.0.
    Remembered per (task, prompt, response): the verifiers are deterministic, and countdown's parses with sympy."""
    key = (instance.task, instance.prompt, response)
    value = _REWARDS.get(key)
    if value is None:
        if len(_REWARDS) >= REWARD_MEMORY:
            _REWARDS.clear()
        value = _REWARDS[key] = float(passed(score(instance, response)))
    return value


REWARD_MEMORY = 2**21  # rewards remembered at most (our bound: a few hundred MB)
_REWARDS: dict[tuple[str, str, str], float] = {}


def forget_rewards() -> None:
    """Empty the remembered rewards (a benchmark's configurations each pay the verifier from cold)."""
    _REWARDS.clear()


def _request(task: str, difficulty: int, size: int, seed: int) -> EntryRequest:
    fam = FAMILIES[task]
    return EntryRequest(fam.dataset, size, seed, tuple(fam.options(difficulty).items()))


def _instances(task: str, entries: list[dict]) -> list[LaptopInstance]:
    fam = FAMILIES[task]
    return [LaptopInstance(task, f"{fam.tag}{fam.prompt(e['metadata'])}=", fam.answer(e), e) for e in entries]


def make_split(
    task: str, difficulty: int, n_train: int, n_test: int, seed: int
) -> tuple[list[LaptopInstance], list[LaptopInstance]]:
    """Disjoint train and test instances of one family; the same seed gives the same split."""
    check_choice("task", task, FAMILIES)
    check_choice("difficulty", difficulty, FAMILIES[task].levels)
    check_int("n_train", n_train, low=1, high=SEED_STRIDE // 4)
    check_int("n_test", n_test, low=1, high=SEED_STRIDE // 12)
    check_int("seed", seed, low=0)
    # reasoning_gym draws item i of a dataset seeded s from s + i: keep the two streams far apart
    base = seed * SEED_STRIDE
    drawn = generate(
        [_request(task, difficulty, n_train, base), _request(task, difficulty, 3 * n_test, base + SEED_STRIDE // 2)]
    )
    train = _dedupe(_instances(task, drawn[0]))
    seen = {i.prompt for i in train}
    test = [i for i in _dedupe(_instances(task, drawn[1])) if i.prompt not in seen]
    test = test[:n_test]
    if len(test) < n_test:
        raise ValueError(f"task {task} at difficulty {difficulty} has too few distinct instances for n_test={n_test}")
    return train, test


def _dedupe(items: list[LaptopInstance]) -> list[LaptopInstance]:
    """Each prompt once; instances with a character outside the model's alphabet (e.g. "aërial") are dropped."""
    seen, out, known = set(), [], set(ALPHABET)
    for i in items:
        if i.prompt not in seen and set(i.prompt + i.answer) <= known:
            seen.add(i.prompt)
            out.append(i)
    return out
