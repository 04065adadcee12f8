"""``knowledge.chunks``: chunks within their size in the one estimator's
tokens, overlapping, cut where the text breaks."""

from __future__ import annotations

import itertools

import pytest

from edgechat.knowledge.chunks import split
from edgechat.media.documents import estimate_tokens


def words(n: int, start: int = 0) -> str:
    return " ".join(f"word{k}" for k in range(start, start + n))


def test_every_chunk_is_within_its_size_as_the_estimator_counts_it() -> None:
    chunks = split(words(400), 50, 10)
    assert len(chunks) > 5
    for chunk in chunks:
        assert chunk.tokens == estimate_tokens(chunk.text) <= 50
    assert [c.n for c in chunks] == list(range(len(chunks)))


def test_each_chunk_repeats_the_end_of_the_one_before() -> None:
    chunks = split(words(300), 50, 10)
    for before, after in itertools.pairwise(chunks):
        first = after.text.split()[0]
        assert first in before.text.split()
        repeated = before.text[before.text.index(" " + first) :]
        assert 0 < estimate_tokens(repeated) <= 12
    assert all(w in " ".join(c.text for c in chunks) for w in words(300).split())


def test_no_overlap_means_the_chunks_join_to_the_text() -> None:
    text = words(200)
    chunks = split(text, 40, 0)
    assert " ".join(c.text for c in chunks) == text


def test_a_paragraph_end_near_the_limit_is_where_it_cuts() -> None:
    text = words(50) + "\n\n" + words(40, 100)
    chunks = split(text, 100, 0)
    assert chunks[0].text == words(50)
    assert chunks[1].text.startswith("word100")


def test_cjk_text_counts_a_token_a_character_and_cuts_anywhere() -> None:
    chunks = split("知识库" * 100, 60, 5)
    assert all(c.tokens <= 60 for c in chunks)
    assert chunks[0].tokens == 60


def test_a_word_longer_than_a_chunk_is_cut_inside() -> None:
    chunks = split("x" * 1000, 50, 0)
    assert [len(c.text) for c in chunks] == [200] * 5


def test_text_without_a_letter_makes_no_chunk() -> None:
    assert split(" \n\n \t", 50, 10) == []


def test_the_overlap_must_be_smaller_than_a_chunk() -> None:
    with pytest.raises(ValueError, match="overlap"):
        split("text", 10, 10)
