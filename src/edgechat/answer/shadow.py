"""Shadow trials: a share of the answers (``SHADOW_RATE``) is also asked of a
challenger model (``SHADOW_MODEL``) after the reply, in ``waitUntil``, and
never shown to anyone; a judge model (``SHADOW_JUDGE``, ``judge``)
compares the two answers. Each trial is kept in ``USAGE_DB``
(``trials``) and summed up on ``/api/usage`` for the admins.

A trial is the answer machinery once more - ``Answer``, ``Sources``,
``Candidates`` (no fallback: a failing challenger is a failed trial),
``Deadlines`` (the trial's own, within ``waitUntil``'s time) - with a
framing that writes nothing; each answer's text is read from its recording
(``moderation.answer_text``), the primary answer's included.

What the trials spend a UTC day is capped (``SHADOW_DAILY_USD``) on the
``spend`` row of ``*shadow`` (``budget.SHADOW``): before a trial, its worst
case (``worst_case``) is reserved with one conditional upsert, which no two
trials can both pass with the last of the cap (``budget.reserve``); a trial
refused is not tried. After it, the reservation is replaced by what the
trial cost, on ``*shadow`` and on the account's row (``*``), so
``DAILY_NEURON_LIMIT`` counts it. docs/operating/shadow.md has the
worst-case overshoot.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import time
from dataclasses import dataclass

from edgechat.alerts import send
from edgechat.answer import judge as judging
from edgechat.answer import moderation, trials
from edgechat.answer.answer import Answer, Sources
from edgechat.answer.candidates import Candidates
from edgechat.answer.context import Context
from edgechat.answer.deadlines import Deadlines
from edgechat.answer.framing import Outcome, Whole
from edgechat.config.settings import Settings
from edgechat.core.errors import EdgechatError
from edgechat.core.models import Model, find
from edgechat.core.ports import Database, DatabaseError
from edgechat.core.requests import ChatRequest, Message
from edgechat.users import budget, usage

__all__ = [
    "JUDGE_S",
    "PROMPT_TOKENS_FACTOR",
    "SETTLE_S",
    "TRIAL_DEADLINE_S",
    "WAIT_UNTIL_S",
    "Trial",
    "Worst",
    "sample",
    "worst_case",
]

# Work handed to waitUntil may run at most 30 s after the response: "If the
# Worker passed a promise to event.waitUntil(), cancellation will be delayed
# until the promise has completed or until an additional 30 seconds have
# elapsed, whichever happens first"
# (https://developers.cloudflare.com/workers/platform/limits/#duration).
WAIT_UNTIL_S = 30.0
# What a trial keeps back of WAIT_UNTIL_S for its D1 writes (the
# settlement and its row, a round trip each at worst).
SETTLE_S = 5.0
# A trial's two models (the challenger, then the judge) answer within this
# of the trial's start.
TRIAL_DEADLINE_S = WAIT_UNTIL_S - SETTLE_S
# Of it, what the judge is sure to have: the challenger's own deadline ends
# this much before the trial's.
JUDGE_S = 6.0
# The challenger's prompt tokens, at most: the answering model's, times this
# (the same conversation, another family's tokenizer).
PROMPT_TOKENS_FACTOR = 1.5


def sample(settings: Settings, request: ChatRequest, draw: float) -> Model | None:
    """The challenger a fresh answer to ``request`` is also asked of, when
    ``draw`` (uniform in [0, 1)) falls in ``SHADOW_RATE``; None when there
    are no trials, the draw misses, the request asks for the challenger
    itself, or the challenger cannot read it (images, tools)."""
    name = settings.shadow_model
    if name is None or settings.shadow_daily_usd is None or draw >= settings.shadow_rate:
        return None
    challenger = find(name)
    if challenger is None or challenger.id == request.model.id:
        return None
    if request.unfit(challenger) is not None:
        return None
    return challenger


@dataclass(frozen=True, slots=True)
class Worst:
    """What a trial can cost at most, per model, in US dollars (rounded up
    to the 1e-8 dollar ``cost_usd`` rounds to)."""

    challenger: float
    judge: float

    @property
    def usd(self) -> float:
        return _up(self.challenger + self.judge)


def worst_case(challenger: Model, judge: Model, prompt_tokens: int, max_tokens: int) -> Worst:
    """A trial's worst case: the challenger reads the conversation the
    answering model read in ``prompt_tokens`` (times PROMPT_TOKENS_FACTOR)
    and writes the request's ``max_tokens``; the judge reads at most
    ``judge.MAX_PROMPT_TOKENS`` and writes ``judge.MAX_OUTPUT_TOKENS``; all
    at list price (cached input is never dearer)."""
    asked = math.ceil(prompt_tokens * PROMPT_TOKENS_FACTOR)
    return Worst(
        challenger=_up(
            (asked * challenger.price_in_per_m + max_tokens * challenger.price_out_per_m) / 1e6
        ),
        judge=_up(
            (
                judging.MAX_PROMPT_TOKENS * judge.price_in_per_m
                + judging.MAX_OUTPUT_TOKENS * judge.price_out_per_m
            )
            / 1e6
        ),
    )


def _up(usd: float) -> float:
    return math.ceil(round(usd * 1e8, 6)) / 1e8


class _Unseen:
    """A trial's framing: nobody sees a trial's answer; its text is read
    from the recording once it is whole."""

    relays_natively = False
    ping = b""
    moderates_output = False

    def opening(self, model: Model) -> bytes:
        return b""

    def first_words(self, model: Model, data: bytes) -> bytes:
        return b""

    def feed(self, data: bytes) -> bytes:
        return b""

    def whole(self, model: Model, answer: Whole) -> bytes:
        return b""

    def closing(self, outcome: Outcome, between_events: bool) -> bytes:
        return b""

    def failure(self, exc: EdgechatError, between_events: bool) -> bytes:
        return b""


_UNSEEN = _Unseen()


@dataclass(frozen=True, slots=True)
class _Asked:
    """One model asked in a trial: how it went, its error code (None: it
    answered), its text (None: no usable answer), what it cost."""

    outcome: Outcome
    error: str | None
    text: str | None
    usd: float


class Trial:
    """One sampled answer's trial: made with the answer (which is then
    recorded), run after the reply if the answer is one to compare."""

    __slots__ = ("_challenger", "_ctx", "_judge", "_judge_sources", "_request", "_sources")

    def __init__(
        self,
        ctx: Context,
        request: ChatRequest,
        challenger: Model,
        sources: Sources,
        options: dict[str, object],
    ) -> None:
        self._ctx = ctx
        self._request = request
        self._challenger = challenger
        judge = find(ctx.settings.shadow_judge)
        assert judge is not None  # the settings hold aliases of the catalog
        self._judge = judge
        # The challenger as the answering model was asked (the conversation's
        # affinity included), but never a provider; the judge plainly. Both
        # after the reply, on a binding the client's leaving does not abort.
        after = ctx.platform.ai_after_reply
        self._sources = dataclasses.replace(sources, ai=after, providers=None)
        self._judge_sources = Sources(after, options, None, sources.redaction)

    def after(self, answered: Answer) -> None:
        """After the reply: the trial, in the background, if the answer is
        complete and new (not from the cache, no error, its client there to
        the end) and came from another model than the challenger."""
        outcome = answered.outcome
        db = self._ctx.platform.db
        if (
            db is None
            or outcome.model is None
            or outcome.model.id == self._challenger.id
            or outcome.error is not None
            or outcome.client_gone
            or outcome.cached
            or outcome.truncated
            or outcome.usage is None
        ):
            return
        recorded = answered.recording.body()
        cap = self._ctx.settings.shadow_daily_usd
        if recorded is None or cap is None:
            return  # too long to record: nothing for the judge to read
        ctx = self._ctx
        worst = worst_case(
            self._challenger, self._judge, outcome.usage["prompt_tokens"], self._request.max_tokens
        )
        row = trials.Row(
            usage.day_of(ctx.cooling.wall()),
            ctx.request_id,
            outcome.model.id,
            self._challenger.id,
            self._judge.id,
            outcome.ttft_ms,
            outcome.tokens_per_s(),
            outcome.cost_usd(),
        )
        ctx.platform.wait_until(self._run(db, row, worst, cap, recorded))

    async def _run(
        self, db: Database, row: trials.Row, worst: Worst, cap_usd: float, recorded: bytes
    ) -> None:
        """Reserves the trial's worst case, asks the challenger, then the
        judge, and settles: the reservation replaced by the cost, the trial
        kept, one log line. ``recorded``: the answer's stream."""
        primary_text = moderation.answer_text(recorded)
        if not primary_text:
            return  # tool calls alone: nothing to compare
        ctx, challenger, day = self._ctx, self._challenger, row.day
        began = time.monotonic()
        reserved = budget.spend_of(challenger, worst.usd)
        log: dict[str, object] = {"request_id": ctx.request_id, "shadow": "tried"}
        try:
            granted = await budget.reserve(db, day, budget.SHADOW, reserved, cap_usd)
        except DatabaseError as exc:
            log.update(shadow="store_error", shadow_error=f"reserve: {exc}")
            _print(log)
            return
        if not granted:
            log.update(shadow="over_cap", reserve_usd=worst.usd)
            _print(log)
            return
        spent = 0.0
        try:
            asked = await self._ask(
                dataclasses.replace(self._request, model=challenger),
                self._sources,
                TRIAL_DEADLINE_S - JUDGE_S - (time.monotonic() - began),
                worst.challenger,
            )
            spent += asked.usd
            row = dataclasses.replace(
                row,
                challenger_ttft_ms=asked.outcome.ttft_ms,
                challenger_tps=asked.outcome.tokens_per_s(),
                challenger_usd=asked.usd,
                challenger_error=asked.error,
            )
            if asked.text is not None:
                order = judging.Order(challenger_first=random.random() < 0.5)
                verdict, judged = await self._verdict(
                    order,
                    primary_text,
                    asked.text,
                    TRIAL_DEADLINE_S - (time.monotonic() - began),
                    worst.judge,
                )
                spent += judged.usd
                row = dataclasses.replace(
                    row,
                    verdict=None if verdict is None else verdict.value,
                    judge_usd=judged.usd,
                    judge_error=judged.error,
                )
        finally:
            # Also when the trial failed in a way nobody foresaw: the
            # reservation is settled and the trial kept.
            actual = budget.spend_of(challenger, _up(spent))
            log.update(
                challenger=challenger.id,
                verdict=row.verdict,
                challenger_error=row.challenger_error,
                judge_error=row.judge_error,
                usd=actual.usd,
            )
            kept = trials.record(db, row)  # under way beside the settlement
            # Settled, then the alerts of the trials' cap and the account's
            # Neurons it crossed (SHADOW_DAILY_USD, DAILY_NEURON_LIMIT).
            await send.counted(
                db,
                ctx.platform.outbound,
                ctx.settings,
                day,
                budget.SHADOW,
                actual,
                ctx.cooling.wall,
                ctx.request_id,
                reserved=reserved,
            )
            try:
                await kept
            except DatabaseError as exc:
                log["shadow_error"] = f"record: {exc}"
            _print(log)

    async def _verdict(
        self, order: judging.Order, primary: str, challenger: str, within: float, worst_usd: float
    ) -> tuple[judging.Verdict | None, _Asked]:
        """The judge's verdict on the two answers (None: no verdict), and its call."""
        turns = moderation.conversation(self._request)
        prompt = order.prompt(judging.conversation_text(turns), primary, challenger)
        asking = ChatRequest(
            messages=(Message("user", prompt),),
            model=self._judge,
            temperature=0.0,
            max_tokens=judging.MAX_OUTPUT_TOKENS,
            reasoning=False,
            server_prompt=False,
        )
        judged = await self._ask(asking, self._judge_sources, within, worst_usd)
        verdict = None if judged.text is None else order.verdict(judged.text)
        return verdict, judged

    async def _ask(
        self, request: ChatRequest, sources: Sources, within: float, worst_usd: float
    ) -> _Asked:
        """``request``'s whole answer from its model alone, within
        ``within`` seconds; never raises. A call that began and whose cost
        is unknown (it broke off) counts at ``worst_usd``."""
        ctx = self._ctx
        answered = Answer(
            request,
            _UNSEEN,
            sources,
            Candidates(request, ctx.settings, ctx.cooling, providers=False, fallback=False),
            Deadlines(ctx.settings, time.monotonic, max(within, 0.0)),
            record=True,
        )
        outcome, began = answered.outcome, False
        try:
            await answered.open()
            began = True
            await answered.whole()  # its end stops the call, however it ends
        except Exception as exc:
            if outcome.error is None:
                if not isinstance(exc, EdgechatError):
                    exc = EdgechatError(detail=f"{type(exc).__name__}: {exc}")
                outcome.error = exc
        cost = outcome.cost_usd()
        if cost is None:
            cost = worst_usd if began else 0.0
        if outcome.error is not None:
            return _Asked(outcome, outcome.error.code, None, cost)
        if outcome.truncated:
            # The stream stopped short of its end: no whole answer to judge.
            return _Asked(outcome, "truncated", None, cost)
        recorded = answered.recording.body()
        text = None if recorded is None else moderation.answer_text(recorded)
        return _Asked(outcome, None, text, cost)


def _print(log: dict[str, object]) -> None:
    # After the reply: the request's own log line is out, so this one says it.
    print(json.dumps(log, ensure_ascii=False, separators=(",", ":")))
