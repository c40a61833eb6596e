"""GSM8K loading, the few-shot prompt, answer extraction and scoring."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.bench.inputs.gsm8k import answers_match, extract_answer, few_shot_prompt, load_gsm8k
from app.core.errors import ConfigError

FIXTURE = Path(__file__).parent.parent.parent / "fixtures" / "gsm8k_small.jsonl"


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("5 + 3 = 8 apples.\n#### 8", "8"),
        ("She pays $1,250 in total.\n#### $1,250", "1250"),
        ("First 3 * 4 = 12. The answer is 12.", "12"),
        ("the ANSWER IS: $45.50 per week", "45.50"),
        ("So 7 - 10 = -3. The answer is -3.", "-3"),
        ("It costs -$5 now", "-5"),
        ("Pages 3-4 are torn, so 20 are left", "20"),
        ("The answer is 6. Next, 2 + 2 = 4", "6"),
        ("The answer is 6.\n#### 7", "7"),  # #### wins over "answer is"
        ("so the total is \\boxed{1,024}.", "1024"),
        ("We get 10, then 20, and finally 30.", "30"),
        ("Total: 1,000,000 dollars", "1000000"),
        ("We had 4 and 9. The answer is unclear.", "9"),  # no number after the phrase
        ("<think>So the answer is 7.</think>\nShe has 8 left.", "8"),  # thinking not read
        ("<think>Maybe 12 or 13", "13"),  # a reasoning block never closed is all there is
        ("I cannot solve this.", None),
        ("", None),
    ],
)
def test_extract_answer(reply: str, expected: str | None) -> None:
    assert extract_answer(reply) == expected


@pytest.mark.parametrize(
    ("extracted", "expected", "match"),
    [
        ("18", "18", True),
        ("3.50", "3.5", True),
        ("18.0", "18", True),
        ("-7", "-7", True),
        ("17", "18", False),
        (None, "18", False),
    ],
)
def test_answers_match_numerically(extracted: str | None, expected: str, match: bool) -> None:
    assert answers_match(extracted, expected) is match


def test_load_gsm8k_reads_final_answers_and_strips_calculator_notes() -> None:
    items = load_gsm8k(FIXTURE)
    assert [item.answer for item in items] == ["27", "155", "150", "150", "-7", "21", "700", "60"]
    assert items[3].solution == (
        "Sam has 5 * 250 = 1,250 marbles. He keeps 1,250 - 1,100 = 150 marbles."
    )
    assert all("<<" not in item.solution and "####" not in item.solution for item in items)


def test_five_shot_prompt_solves_each_shot_then_asks() -> None:
    items = load_gsm8k(FIXTURE)
    prompt = few_shot_prompt(items[:5], items[5].question)
    blocks = prompt.split("\n\n")
    assert len(blocks) == 6
    for block, shot in zip(blocks, items[:5], strict=False):
        assert block == (
            f"Question: {shot.question}\nAnswer: {shot.solution} The answer is {shot.answer}."
        )
    assert blocks[-1] == f"Question: {items[5].question}\nAnswer:"
    assert extract_answer(blocks[4]) == items[4].answer  # the shots teach the extracted form


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "line 2: not a {question, answer}"),
        ('{"question": "q"}', "line 2: not a {question, answer}"),
        ('{"question": "q", "answer": "no final line"}', "line 2: the answer does not end"),
    ],
)
def test_bad_lines_name_the_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "data.jsonl"
    path.write_text('{"question": "q", "answer": "#### 1"}\n' + line + "\n")
    with pytest.raises(ConfigError, match=message.replace("line 2", f"{path}:2")):
        load_gsm8k(path)


def test_missing_dataset_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the dataset"):
        load_gsm8k(tmp_path / "missing.jsonl")
