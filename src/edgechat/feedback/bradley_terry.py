"""Ratings from votes between pairs of models: the Bradley-Terry model,
fitted by Newton's method.

Each model ``i`` has a strength ``p_i = e^θ_i``; in a vote between ``i``
and ``j``, ``i`` is preferred with probability ``p_i / (p_i + p_j)``
(Bradley and Terry, 1952). A tie counts as half a win for each, the
convention of LMSYS's Chatbot Arena, where "both bad" is a tie too
(``compute_elo`` in lm-sys/FastChat's ``elo_analysis.py``).

The fit is the posterior's maximum: the votes' likelihood times a prior
of ``PRIOR_WINS`` wins and as many losses of every model against a fixed
reference model of strength 1. The prior keeps every rating finite (a
model that never lost would otherwise rise without bound) and draws a
model with few votes towards the others; against many votes it weighs
next to nothing.

The log-posterior is strictly concave in θ, so Newton's method, halving a
step that would not climb, converges to its one maximum (a handful of steps
for a few models: no per-vote work, and the counts come pre-summed per
pair).

Votes tell only how models compare, never how good they all are, so the
ratings are centred: their mean is ``MEAN``. The uncertainty is the
curvature at the maximum: θ's covariance is the inverse of the negative
Hessian (the observed information), taken for each θ less the mean θ (the
level, which only the prior pins, is left out); the interval is ``Z``
standard errors either side (95 %).

Ratings are on the Elo scale, ``MEAN + SCALE · log10(p_i / p̄)``:
``SCALE`` points apart are 10 : 1 odds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "MEAN",
    "PRIOR_WINS",
    "SCALE",
    "TIE",
    "Pair",
    "Rated",
    "Z",
    "fit",
    "log_posterior",
]

MEAN = 1000.0
SCALE = 400.0
# Each model's virtual wins, and as many losses, against the reference model.
PRIOR_WINS = 1.0
# What a tie is worth to each side, in wins.
TIE = 0.5
# The interval's half-width in standard errors: the normal's 97.5th percentile.
Z = 1.959963984540054
MAX_STEPS = 100
# Newton stops once no θ moves by more than this.
TOLERANCE = 1e-10

_PER_THETA = SCALE / math.log(10)


@dataclass(frozen=True, slots=True)
class Pair:
    """The votes between two models: ``a`` preferred, ``b`` preferred, neither."""

    a: str
    b: str
    a_wins: float
    b_wins: float
    ties: float = 0.0


@dataclass(frozen=True, slots=True)
class Rated:
    """A model's rating and its interval, on the Elo scale."""

    rating: float
    low: float
    high: float


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def _log_sum_exp(a: float, b: float) -> float:
    high = max(a, b)
    return high + math.log1p(math.exp(-abs(a - b)))


class _Votes:
    """The votes summed: games ``n[i][j]`` between each two models and each
    model's wins (ties counted as ``TIE`` each)."""

    def __init__(self, names: Sequence[str], pairs: Iterable[Pair]) -> None:
        self.names = list(names)
        where = {name: k for k, name in enumerate(self.names)}
        size = len(self.names)
        self.games = [[0.0] * size for _ in range(size)]
        self.wins = [0.0] * size
        for pair in pairs:
            i, j = where[pair.a], where[pair.b]
            games = pair.a_wins + pair.b_wins + pair.ties
            self.games[i][j] += games
            self.games[j][i] += games
            self.wins[i] += pair.a_wins + TIE * pair.ties
            self.wins[j] += pair.b_wins + TIE * pair.ties


def log_posterior(votes: _Votes, theta: Sequence[float]) -> float:
    """The log of the votes' likelihood times the prior (up to a constant)."""
    size = len(theta)
    total = 0.0
    for i in range(size):
        total += (votes.wins[i] + PRIOR_WINS) * theta[i]
        total -= 2 * PRIOR_WINS * _log_sum_exp(theta[i], 0.0)
        for j in range(i + 1, size):
            if votes.games[i][j]:
                total -= votes.games[i][j] * _log_sum_exp(theta[i], theta[j])
    return total


def _slope_and_information(
    votes: _Votes, theta: Sequence[float]
) -> tuple[list[float], list[list[float]]]:
    """The log-posterior's gradient and its negative Hessian at ``theta``."""
    size = len(theta)
    slope = [0.0] * size
    information = [[0.0] * size for _ in range(size)]
    for i in range(size):
        reference = _sigmoid(theta[i])
        slope[i] = votes.wins[i] + PRIOR_WINS - 2 * PRIOR_WINS * reference
        information[i][i] = 2 * PRIOR_WINS * reference * (1 - reference)
        for j in range(size):
            games = votes.games[i][j]
            if j == i or not games:
                continue
            chance = _sigmoid(theta[i] - theta[j])
            slope[i] -= games * chance
            weight = games * chance * (1 - chance)
            information[i][i] += weight
            information[i][j] -= weight
    return slope, information


def _inverse(matrix: Sequence[Sequence[float]]) -> list[list[float]]:
    """The inverse of a symmetric positive definite matrix (Gauss-Jordan
    with partial pivoting; a few models, so a few rows)."""
    size = len(matrix)
    rows = [[*row, *(1.0 if j == i else 0.0 for j in range(size))] for i, row in enumerate(matrix)]
    for col in range(size):
        pivot = max(range(col, size), key=lambda r: abs(rows[r][col]))
        rows[col], rows[pivot] = rows[pivot], rows[col]
        head = rows[col][col]
        rows[col] = [value / head for value in rows[col]]
        for r in range(size):
            if r != col and rows[r][col]:
                factor = rows[r][col]
                rows[r] = [v - factor * p for v, p in zip(rows[r], rows[col], strict=True)]
    return [row[size:] for row in rows]


def _elo(theta: float) -> float:
    return MEAN + _PER_THETA * theta


def fit(pairs: Iterable[Pair]) -> dict[str, Rated]:
    """Every model named in ``pairs``, rated, with its interval."""
    pairs = list(pairs)
    names = sorted({name for pair in pairs for name in (pair.a, pair.b)})
    if not names:
        return {}
    votes = _Votes(names, pairs)
    theta = [0.0] * len(names)
    here = log_posterior(votes, theta)
    for _ in range(MAX_STEPS):
        slope, information = _slope_and_information(votes, theta)
        covariance = _inverse(information)
        step = [sum(c * g for c, g in zip(row, slope, strict=True)) for row in covariance]
        scale = 1.0
        while True:
            tried = [t + scale * s for t, s in zip(theta, step, strict=True)]
            there = log_posterior(votes, tried)
            if there >= here or scale < 1e-9:
                break
            scale /= 2
        moved = max(abs(scale * s) for s in step)
        theta, here = tried, there
        if moved < TOLERANCE:
            break
    _, information = _slope_and_information(votes, theta)
    covariance = _inverse(information)
    size = len(names)
    level = sum(theta) / size
    row_means = [sum(row) / size for row in covariance]
    all_mean = sum(row_means) / size
    rated = {}
    for k, name in enumerate(names):
        # The variance of θ_k less the mean θ: (P C P)_kk, P = I - 11ᵀ/n.
        variance = covariance[k][k] - 2 * row_means[k] + all_mean
        spread = Z * math.sqrt(max(variance, 0.0))
        centred = theta[k] - level
        rated[name] = Rated(
            round(_elo(centred), 1),
            round(_elo(centred - spread), 1),
            round(_elo(centred + spread), 1),
        )
    return rated
