"""A user's owner tag in the Vectorize index."""

from edgechat.core.ids import owner_tag


def test_an_owner_tag_is_a_digest_within_what_the_index_filters_on() -> None:
    tag = owner_tag("access:ann@example.com")
    assert len(tag.encode()) <= 64
    assert "ann" not in tag
    assert tag != owner_tag("access:bob@example.com")
