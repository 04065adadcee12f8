"""An answer's clock (``deadlines``), on a clock the test moves."""

from __future__ import annotations

import asyncio

import pytest

from edgechat.answer.deadlines import Deadlines
from edgechat.config.settings import Settings
from edgechat.core.faults import DeadlineExceeded, NoFirstToken
from tests.unit.fakes import FakeUpstream

SETTINGS = Settings(first_token_timeout_s=10, idle_timeout_s=4, total_timeout_s=25, heartbeat_s=3)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def deadlines() -> tuple[Deadlines, Clock]:
    clock = Clock()
    return Deadlines(SETTINGS, clock), clock


def kept(d: Deadlines) -> type[Exception] | None:
    upstream = FakeUpstream([])
    try:
        asyncio.run(d.keep(upstream))
    except DeadlineExceeded as exc:
        assert upstream.cancelled
        return type(exc)
    return None


def test_each_model_asked_has_its_own_first_token_deadline() -> None:
    d, clock = deadlines()
    clock.now += 9
    assert kept(d) is None
    clock.now += 1
    assert kept(d) is NoFirstToken  # the next model may answer instead
    d.asking()
    assert d.first_token_left() == 10
    clock.now += 9.5
    assert kept(d) is None


def test_the_total_deadline_bounds_every_model_and_ends_the_chain() -> None:
    d, clock = deadlines()
    clock.now += 20
    d.asking()
    assert d.first_token_left() == 5  # what the total deadline leaves
    clock.now += 5
    assert kept(d) is DeadlineExceeded  # no fallback past the total


def test_after_the_first_words_only_idle_and_total_count() -> None:
    d, clock = deadlines()
    clock.now += 2
    d.first_words()
    d.heard()
    clock.now += 3.9
    assert kept(d) is None
    assert d.next() == pytest.approx(clock.now + 0.1)
    clock.now += 0.1
    assert kept(d) is DeadlineExceeded


def test_a_new_model_is_not_charged_the_last_ones_silence() -> None:
    d, clock = deadlines()
    d.heard()
    clock.now += 3
    d.asking()
    clock.now += 3
    assert kept(d) is None  # 6 s since the last model's bytes, none from this one


def test_the_heartbeat_follows_the_last_write() -> None:
    d, clock = deadlines()
    assert d.next_ping(True) == clock.now + 3
    clock.now += 2
    d.wrote()
    assert d.next_ping(True) == clock.now + 3
    assert d.next_ping(False) == float("inf")


def test_a_shorter_total_holds_every_deadline_to_it() -> None:
    # A shadow trial's answer: within what waitUntil leaves, not TOTAL_TIMEOUT_S.
    clock = Clock()
    d = Deadlines(SETTINGS, clock, total_s=6)
    assert d.first_token_left() == 6  # not the first-token deadline's 10
    assert d.next() == 106
    clock.now += 5
    d.first_words()
    d.heard()
    assert kept(d) is None
    clock.now += 1
    assert d.passed(clock.now) == "total deadline of 6 s"
    assert kept(d) is DeadlineExceeded
    # Never longer than TOTAL_TIMEOUT_S.
    assert Deadlines(SETTINGS, clock, total_s=99).total_s == 25
    assert d.elapsed_ms() == 6000.0
