"""The known-answer model's answer and permutation, checked on the CPU (no GPU marker).

The GPU tests and the shipped demo trace rely on them: the greedy walk from `<think>` must
visit every piece once and come back, and the test tokenizer must decode the walk into the
answer's text exactly.
"""

from __future__ import annotations

import pytest

from tests.gpu import models
from tests.gpu.known_answer_text import ANSWER_TEXT


def test_the_answer_is_cut_into_distinct_pieces_that_join_back_into_its_text() -> None:
    assert "".join(models.ANSWER) == ANSWER_TEXT
    assert len(set(models.ANSWER)) == len(models.ANSWER)
    assert 2000 <= len(models.ANSWER) <= 4000, "the demo reply streams for seconds at ~600 tok/s"
    assert models.expected_reply()[1] == ANSWER_TEXT


@pytest.mark.parametrize("text", ["abab", "aaaa", "abcabcabc", "a"])
def test_pieces_that_would_repeat_at_the_end_join_the_last_one(text: str) -> None:
    cut = models.pieces(text)
    assert "".join(cut) == text
    assert len(set(cut)) == len(cut)


def test_the_permutation_walks_one_cycle_through_the_whole_known_reply() -> None:
    perm = models.permutation()
    walk = models.cycle()
    assert sorted(perm) == list(range(models.VOCAB)), "P is a permutation"
    assert walk[0] == models.THINK and walk[-1] == models.EOS
    assert len(set(walk)) == len(walk) == 3 + len(models.REASONING) + len(models.ANSWER)
    token, seen = models.THINK, [models.THINK]
    while (token := perm[token]) != models.THINK:
        seen.append(token)
    assert seen == walk, "P walks the cycle from <think> and comes back to it"
    off = next(i for i in range(models.VOCAB) if i not in set(walk))
    assert perm[off] == off


def test_the_walk_decodes_to_the_known_reply_through_the_test_tokenizer() -> None:
    pytest.importorskip("tokenizers", reason="the test tokenizer needs `tokenizers`")
    core = models.tokenizer_core()
    walk = models.cycle()
    reasoning, answer = models.expected_reply()
    end_think = walk.index(models.END_THINK)
    assert core.decode(walk[1:end_think]) == reasoning
    assert core.decode(walk[end_think + 1 : -1]) == answer
    assert core.token_to_id(models.vocabulary()[walk[-2]]) == walk[-2]


def test_the_saved_tokenizer_decodes_the_known_reply(tmp_path) -> None:
    """What SGLang loads: the model folder's tokenizer, decoding as its detokenizer does."""
    transformers = pytest.importorskip("transformers", reason="the model folder needs it")
    folder = models.write_model_dir(tmp_path / "model", known_answer=True)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    walk = models.cycle()
    end_think = walk.index(models.END_THINK)
    answer = tokenizer.decode(walk[end_think + 1 :], skip_special_tokens=True)
    assert answer == models.expected_reply()[1]
    chat = [
        {"role": "user", "content": "What did each lever do?"},
        {"role": "assistant", "content": answer},
        {"role": "user", "content": "And how is accept length measured?"},
    ]
    for turn in (chat[:1], chat):
        text = tokenizer.apply_chat_template(turn, tokenize=False, add_generation_prompt=True)
        prompt = tokenizer.encode(text)
        assert prompt[-1] == walk[0], "the chat prompt ends on the cycle's first token"
    assert len(prompt) + len(walk) <= models.CONTEXT, "the second turn fits the test context"
