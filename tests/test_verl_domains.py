"""Code, STEM and instruction-following rows from local files (brorl_lib/verl_recipe/domains.py) and their
rewards, on the hand-made rows in tests/data/domains/ (verl's schema for code and STEM, IFEval's for
instruction following)."""

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from brorl_lib.tasks import instruction_scoring
from brorl_lib.verl_recipe import data, domains, rewards

SAMPLES = Path(__file__).parent / "data" / "domains"
CONVERTERS = {"code": domains.code_rows, "stem": domains.stem_rows, "instruction": domains.instruction_rows}
FILES = {"code": "code.jsonl", "stem": "stem.jsonl", "instruction": "ifeval.jsonl"}
# A program passing every test of each sample code row, in file order.
PROGRAMS = [
    "a, b = map(int, input().split())\nprint(a + b)",
    "print(input()[::-1])",
    "print(sum(c in 'aeiou' for c in input()))",
    "import math\nprint(math.factorial(int(input())))",
]
# A response following every instruction of each sample IFEval row, in file order.
FOLLOWING = [
    "cats like sunny windows because the warm light feels cozy and they can watch the birds outside all day.",
    "A walk in the park is calm and green with birds singing in tall old trees while children laugh and dogs run",
    "<<a cloud over the puddle>>\nA cloud drifts by and a puddle waits below.",
    "* a blanket\n* sandwiches\n* lemonade\n\nP.S. bring sunscreen too.",
]


def source_records(family: str) -> list[dict]:
    return [json.loads(line) for line in (SAMPLES / FILES[family]).read_text().splitlines()]


def score(row: dict, response: str) -> dict:
    truth, extra = row["reward_model"]["ground_truth"], row["extra_info"]
    return rewards.compute_score(row["data_source"], response, truth, extra, math_verify="inline")


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture(scope="module")
def rows() -> dict[str, list[dict]]:
    return {family: convert(SAMPLES / FILES[family]) for family, convert in CONVERTERS.items()}


# --- converters ---
@pytest.mark.parametrize("family", list(CONVERTERS))
def test_each_converter_gives_rows_in_the_recipes_schema_keeping_the_ground_truth(rows, family):
    got, records = rows[family], source_records(family)
    data.check_schema(pd.DataFrame(got, columns=list(data.COLUMNS)), family)
    assert len(got) == len(records) >= 3
    for i, (row, rec) in enumerate(zip(got, records)):
        assert data.split_source(row["data_source"])[0] == family == row["ability"]
        name = data.split_source(row["data_source"])[1]
        assert row["extra_info"] == {"index": i, "split": "train", "family": family, "task": name, "entry": ""}
        [message] = row["prompt"]  # one user message: the system message of a verl row is dropped
        assert message["role"] == "user"
        truth = row["reward_model"]["ground_truth"]
        if family == "instruction":
            assert message["content"] == rec["prompt"]  # an IFEval prompt states its own instructions
            assert row["data_source"] == "instruction.ifeval"  # named by the file
            kept = json.loads(truth)
            assert kept["instruction_id_list"] == rec["instruction_id_list"]
            assert kept["kwargs"] == [{k: v for k, v in kw.items() if v is not None} for kw in rec["kwargs"]]
        else:
            question = rec["prompt"][-1]["content"]
            assert message["content"] == f"{question}\n\n{data.INSTRUCTIONS[family]}"
            assert row["data_source"] == f"{family}.{rec['data_source']}"  # named by the row's own data_source
            assert truth == rec["reward_model"]["ground_truth"]
    assert CONVERTERS[family](SAMPLES / FILES[family], "val", limit=2) == [
        r | {"extra_info": r["extra_info"] | {"split": "val"}} for r in got[:2]
    ]


def test_rows_pass_through_parquet_and_parquet_sources_give_the_same_rows(rows, tmp_path):
    everything = pd.DataFrame([r for family in CONVERTERS for r in rows[family]], columns=list(data.COLUMNS))
    back = data.read_parquet(data.write_parquet(everything, tmp_path / "domains.parquet"))
    assert len(back) == len(everything) == 12
    for b, e in zip(back.to_dict("records"), everything.to_dict("records")):
        assert {**b, "prompt": list(b["prompt"])} == e
    for family, convert in CONVERTERS.items():  # parquet reads lists as arrays and fills absent kwargs with None
        source = (tmp_path / FILES[family]).with_suffix(".parquet")
        pd.DataFrame(source_records(family)).to_parquet(source)
        assert convert(source) == rows[family]


def test_a_verl_file_mixing_families_gives_each_converter_its_own_rows(tmp_path):
    stem, code = source_records("stem"), source_records("code")
    mixed = write_jsonl(tmp_path / "mixed.jsonl", [code[0], stem[0], code[1]])
    assert [r["data_source"] for r in domains.code_rows(mixed)] == ["code.toy_io", "code.toy_io"]
    assert [r["data_source"] for r in domains.stem_rows(mixed)] == ["stem.toy_physics"]
    other = write_jsonl(tmp_path / "other.jsonl", [stem[0], {**stem[1], "ability": "chemistry"}])
    assert len(domains.stem_rows(other)) == 2  # an ability that is not one of our families is kept


@pytest.mark.parametrize(
    "family, field",
    [
        ("code", "prompt"),
        ("code", "reward_model"),
        ("stem", "data_source"),
        ("instruction", "kwargs"),
        ("instruction", "instruction_id_list"),
    ],
)
def test_a_missing_field_is_refused_naming_the_file_row_and_field(tmp_path, family, field):
    records = source_records(family)
    records[2] = {k: v for k, v in records[2].items() if k != field}
    path = write_jsonl(tmp_path / f"broken_{family}.jsonl", records)
    with pytest.raises(ValueError, match=rf"broken_{family}\.jsonl'?: row 2: missing field '{field}'"):
        CONVERTERS[family](path)


@pytest.mark.parametrize(
    "family, change, message",
    [
        ("code", {"reward_model": {"style": "rule"}}, "row 1: missing field 'reward_model.ground_truth'"),
        ("code", {"reward_model": {"style": "rule", "ground_truth": '{"inputs": ["1"]}'}}, "row 1: tests must be"),
        ("stem", {"prompt": [{"role": "system", "content": "x"}]}, "row 1: prompt must be a list of chat messages"),
        (
            "instruction",
            {"instruction_id_list": ["keywords:no_such_check"], "kwargs": [{}]},
            "row 1: unknown instruction 'keywords:no_such_check'",
        ),
        (
            "instruction",
            {"instruction_id_list": ["keywords:existence"], "kwargs": [{"keywords": None}]},
            re.escape("row 1: instruction 'keywords:existence' lacks kwargs ['keywords']"),
        ),
        (
            "instruction",
            {"instruction_id_list": ["length_constraints:number_words"], "kwargs": [{"num_words": 5, "relation": "~"}]},
            "row 1: instruction 'length_constraints:number_words' refuses kwargs",
        ),
        ("instruction", {"kwargs": []}, "row 1: kwargs must be a list of one dict per instruction"),
    ],
)
def test_an_unusable_row_is_refused_before_any_row_is_built(tmp_path, family, change, message):
    records = source_records(family)
    records[1] = records[1] | change
    with pytest.raises(ValueError, match=message):
        CONVERTERS[family](write_jsonl(tmp_path / "bad.jsonl", records))


def test_bad_paths_and_limits_are_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        domains.code_rows(tmp_path / "absent.jsonl")
    with pytest.raises(ValueError, match="the file must end in one of"):
        domains.stem_rows(tmp_path / "rows.csv")
    with pytest.raises(ValueError, match="limit=-1 is out of range"):
        domains.stem_rows(SAMPLES / "stem.jsonl", limit=-1)


def test_the_notebooks_records_frames_read_verl_and_ifeval_files():
    """``data.records_frames`` (notebook 05's stem_dataset and code_dataset) takes verl-schema files too."""
    for family, param in (("code", "code_dataset"), ("stem", "stem_dataset"), ("instruction", "instruction_dataset")):
        train, val = data.records_frames(str(SAMPLES / FILES[family]), family, 0, 1, 0, param)
        data.check_schema(pd.concat([train, val]))
        assert (len(train), len(val)) == (3, 1) and set(train.ability) == {family}


# --- rewards ---
def test_code_reward_is_one_for_a_passing_program_and_less_for_a_failing_one(rows):
    for row, program in zip(rows["code"], PROGRAMS, strict=True):
        assert score(row, f"Here it is.\n```python\n{program}\n```") == {"score": 1.0, "acc": 1.0}
    wrong = score(rows["code"][0], "```python\nprint(3)\n```")  # right on the first of three tests only
    assert wrong == {"score": pytest.approx(1 / 3), "acc": 0.0}
    assert score(rows["code"][0], "```python\nprint(\n```")["score"] == 0.0  # a syntax error


def test_stem_reward_is_binary_on_the_boxed_answer(rows):
    for row in rows["stem"]:
        answer = row["reward_model"]["ground_truth"]
        assert score(row, f"<think>...</think> So it is \\boxed{{{answer}}}.") == {"score": 1.0, "acc": 1.0}
        assert score(row, f"So it is \\boxed{{{answer}1}}.") == {"score": 0.0, "acc": 0.0}


def test_instruction_reward_is_the_share_of_instructions_followed(rows):
    for row, response in zip(rows["instruction"], FOLLOWING, strict=True):
        assert score(row, f"<think>Plan: Follow Every Rule.</think>{response}") == {"score": 1.0, "acc": 1.0}
        assert score(row, "I Will Not, Sorry.") == {"score": 0.0, "acc": 0.0}
    words, comma = rows["instruction"][1], FOLLOWING[1].replace("calm and green", "calm, green")
    assert score(words, comma) == {"score": 0.5, "acc": 0.0}  # enough words, but a comma
    assert score(words, "<think>still thinking, in words enough to count and more") == {"score": 0.0, "acc": 0.0}
    lowercase = rows["instruction"][0]  # langdetect is seeded: the same score on every call
    assert {score(lowercase, "ok then, sure.")["score"] for _ in range(5)} == {
        score(lowercase, "ok then, sure.")["score"]
    }
    with pytest.raises(ValueError, match="unknown instruction"):
        instruction_scoring.instruction_score("x", json.dumps({"instruction_id_list": ["x:y"], "kwargs": [{}]}))


def test_sentence_counts_need_nltks_punkt_model_and_say_how_to_install_it(tmp_path):
    record = {
        "key": 9,
        "prompt": "Answer in fewer than 3 sentences: what is rain?",
        "instruction_id_list": ["length_constraints:number_sentences"],
        "kwargs": [{"relation": "less than", "num_sentences": 3}],
    }
    path = write_jsonl(tmp_path / "sentences.jsonl", [record])
    try:
        instruction_scoring.require_punkt("probe")
    except ValueError:
        with pytest.raises(ValueError, match=r"sentences.jsonl'?: row 0: .*punkt_tab.*nltk.downloader punkt_tab"):
            domains.instruction_rows(path)
    else:
        [row] = domains.instruction_rows(path)
        assert score(row, "Rain is water falling from clouds.")["score"] == 1.0
