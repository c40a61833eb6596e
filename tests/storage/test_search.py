"""Full-text search: literal terms (no query syntax), any language, answer and reasoning."""

from __future__ import annotations

import pytest

from app.storage import ChatStore, MessageStatus

TEXTS = [
    'She said "quoted words" twice',
    "glob pattern wild*card here",
    "flag -minus and a--b",
    "mapping key:value pair",
    "logic a AND b OR NOT c NEAR(x)",
    "percent 100% done, snake_case name",
    "模型训练 uses the GPU",
    "parens (open and ^caret",
]


@pytest.fixture
def filled(store: ChatStore) -> ChatStore:
    conversation = store.create_conversation("Searchable")
    for text in TEXTS:
        store.add_user_message(conversation.id, text)
    return store


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ('"quoted words"', TEXTS[0]),
        ('said "quoted', TEXTS[0]),
        ('"', TEXTS[0]),
        ("wild*card", TEXTS[1]),
        ("*", TEXTS[1]),
        ("-minus", TEXTS[2]),
        ("a--b", TEXTS[2]),
        ("key:value", TEXTS[3]),
        (":", TEXTS[3]),
        ("NEAR(x)", TEXTS[4]),
        ("NOT", TEXTS[4]),
        ("100%", TEXTS[5]),
        ("%", TEXTS[5]),
        ("_", TEXTS[5]),
        ("模型", TEXTS[6]),
        ("训练 gpu", TEXTS[6]),
        ("(open ^caret", TEXTS[7]),
    ],
)
def test_special_characters_are_searched_literally(
    filled: ChatStore, query: str, expected: str
) -> None:
    hits = filled.search(query)
    assert len(hits) == 1, [hit.snippet for hit in hits]
    (hit,) = hits
    assert hit.title == "Searchable"
    assert "«" in hit.snippet
    assert hit.snippet.replace("«", "").replace("»", "") in expected


def test_every_term_must_match_case_insensitively(filled: ChatStore) -> None:
    assert [h.snippet for h in filled.search("GLOB HERE")] == ["«glob» pattern wild*card «here»"]
    assert filled.search("glob value") == []


def test_blank_queries_find_nothing(filled: ChatStore) -> None:
    assert filled.search("") == []
    assert filled.search("   \n") == []


def test_reasoning_and_flushed_partial_text_are_found(store: ChatStore) -> None:
    conversation = store.create_conversation("Thinking")
    writer = store.start_reply(conversation.id)
    writer.append(answer="short answer", reasoning="deliberating about zebras")
    (hit,) = store.search("zebras")
    assert hit.message_id == writer.message_id
    assert hit.snippet == "deliberating about «zebras»"

    writer.append(answer=" then giraffes")
    writer.flush()
    assert [h.message_id for h in store.search("giraffes")] == [writer.message_id]
    writer.finish(MessageStatus.COMPLETE)


def test_hits_are_newest_first_limited_and_one_line(store: ChatStore) -> None:
    old = store.create_conversation("old")
    new = store.create_conversation("new")
    store.add_user_message(old.id, "first line\nwith the term\n\nand more")
    store.add_user_message(new.id, "the term again")
    hits = store.search("term")
    assert [(h.conversation_id, h.title) for h in hits] == [(new.id, "new"), (old.id, "old")]
    assert hits[1].snippet == "first line with the «term» and more"
    assert len(store.search("term", limit=1)) == 1


def test_long_messages_give_a_short_snippet_around_the_match(store: ChatStore) -> None:
    conversation = store.create_conversation()
    store.add_user_message(conversation.id, "x" * 500 + " needle " + "y" * 500)
    (hit,) = store.search("needle")
    assert hit.snippet.startswith("…") and hit.snippet.endswith("…")
    assert "«needle»" in hit.snippet
    assert len(hit.snippet) < 120


def test_a_snippet_is_cut_between_words(store: ChatStore) -> None:
    conversation = store.create_conversation()
    words = "the quick brownish fox jumped over the lazy dog "
    store.add_user_message(conversation.id, "alpha " * 10 + words * 5)
    (hit,) = store.search("lazy")
    assert hit.snippet == (
        "…brownish fox jumped over the «lazy» dog the quick brownish fox jumped over the "
        "«lazy» dog the…"
    )


def test_every_branch_is_searched_short_terms_too(store: ChatStore) -> None:
    """A regenerated reply and an edited question stay findable off the path on screen."""
    chat = store.create_conversation("Branches")
    question = store.add_user_message(chat.id, "pick a colour")
    for answer in ("ox red", "ox blue"):
        writer = store.start_reply(chat.id, parent_id=question.id)
        writer.append(answer)
        writer.finish(MessageStatus.COMPLETE)
    store.add_user_message(chat.id, "pick a shape", alternative_to=question.id)
    assert [m.content for m in store.messages(chat.id)] == ["pick a shape"]
    assert [hit.snippet for hit in store.search("ox")] == ["«ox» blue", "«ox» red"]
    assert [hit.snippet for hit in store.search("colour")] == ["pick a «colour»"]
    assert store.count_matches("pick") == 2
