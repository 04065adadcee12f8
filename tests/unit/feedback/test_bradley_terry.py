"""The ratings' math: a fit that matches ratings worked out by hand, the
posterior's maximum (its slope is zero there, and no nearby θ does better),
and an interval that is the curvature's."""

from __future__ import annotations

import math

import pytest

from edgechat.feedback import bradley_terry
from edgechat.feedback.bradley_terry import Pair, Rated, fit

POINTS = 400 / math.log(10)


def by_hand(wins: int, losses: int) -> float:
    """Two models, ``wins`` : ``losses``, each with the prior's win and loss
    against the reference model: by symmetry θb = -θa = -t at the maximum, where
    (w - l) = n tanh t + 2 tanh(t/2) (the slope of the log-posterior
    (w - l) t - n log(2 cosh t) - 4 log(2 cosh(t/2))). Bisection."""
    low, high = -20.0, 20.0
    for _ in range(200):
        t = (low + high) / 2
        if (wins + losses) * math.tanh(t) + 2 * math.tanh(t / 2) < wins - losses:
            low = t
        else:
            high = t
    return t


def test_two_models_rate_as_worked_out_by_hand() -> None:
    rated = fit([Pair("a", "b", 3, 1)])
    t = by_hand(3, 1)
    assert rated["a"].rating == pytest.approx(1000 + POINTS * t, abs=0.05)
    assert rated["b"].rating == pytest.approx(1000 - POINTS * t, abs=0.05)
    # The number itself, worked out once: t = 0.42053...
    assert rated["a"].rating == 1072.9
    assert rated["b"].rating == 927.1


def test_ties_are_half_a_win_each_and_a_tie_alone_rates_both_at_the_mean() -> None:
    assert fit([Pair("a", "b", 0, 0, 4)]) == fit([Pair("a", "b", 2, 2)])
    rated = fit([Pair("a", "b", 0, 0, 1)])
    assert rated["a"].rating == rated["b"].rating == 1000.0
    assert rated["a"].low < 1000 < rated["a"].high


def test_the_order_of_a_pair_changes_nothing() -> None:
    assert fit([Pair("a", "b", 5, 2, 1)]) == fit([Pair("b", "a", 2, 5, 1)])


def test_a_model_that_never_lost_stays_finite() -> None:
    few = fit([Pair("a", "b", 3, 0)])["a"]
    many = fit([Pair("a", "b", 300, 0)])["a"]
    assert 1000 < few.rating < many.rating < 3000


def test_more_votes_of_the_same_odds_narrow_the_interval() -> None:
    few = fit([Pair("a", "b", 6, 2)])["a"]
    many = fit([Pair("a", "b", 60, 20)])["a"]
    assert many.high - many.low < (few.high - few.low) / 2


def _votes(pairs: list[Pair]) -> bradley_terry._Votes:
    names = sorted({n for p in pairs for n in (p.a, p.b)})
    return bradley_terry._Votes(names, pairs)


PAIRS = [
    Pair("a", "b", 7, 3, 2),
    Pair("b", "c", 4, 4, 1),
    Pair("a", "c", 9, 1),
    Pair("c", "d", 2, 5),
]


def _theta(rated: dict[str, Rated]) -> list[float]:
    return [(rated[n].rating - 1000) / POINTS for n in sorted(rated)]


def _level(votes: bradley_terry._Votes, theta: list[float]) -> list[float]:
    """``theta`` shifted as a whole to where the posterior is highest: the
    ratings are centred, and only the prior says where the level is."""
    low, high = -5.0, 5.0
    for _ in range(100):
        mid = (low + high) / 2
        ahead = bradley_terry.log_posterior(votes, [t + mid + 1e-7 for t in theta])
        behind = bradley_terry.log_posterior(votes, [t + mid - 1e-7 for t in theta])
        low, high = (mid, high) if ahead > behind else (low, mid)
    return [t + low for t in theta]


def test_the_fit_is_the_posteriors_maximum() -> None:
    rated = fit(PAIRS)
    votes = _votes(PAIRS)
    theta = _level(votes, _theta(rated))
    here = bradley_terry.log_posterior(votes, theta)
    h = 1e-6
    for k in range(len(theta)):
        up = [t + (h if i == k else 0) for i, t in enumerate(theta)]
        down = [t - (h if i == k else 0) for i, t in enumerate(theta)]
        slope = (
            bradley_terry.log_posterior(votes, up) - bradley_terry.log_posterior(votes, down)
        ) / (2 * h)
        # The ratings are rounded to 0.1: θ to 0.00029, so the slope is ~0.
        assert abs(slope) < 0.01, (k, slope)
        for step in (0.01, -0.01):
            moved = [t + (step if i == k else 0) for i, t in enumerate(theta)]
            assert bradley_terry.log_posterior(votes, moved) < here


def test_the_interval_is_the_observed_informations() -> None:
    rated = fit(PAIRS)
    votes = _votes(PAIRS)
    theta = _level(votes, _theta(rated))
    h = 1e-4
    size = len(theta)

    def at(delta: dict[int, float]) -> float:
        return bradley_terry.log_posterior(
            votes, [t + delta.get(i, 0.0) for i, t in enumerate(theta)]
        )

    # The negative Hessian by finite differences, inverted by the fit's own
    # elimination (checked against the identity below).
    information = [
        [
            -(at({i: h, j: h}) - at({i: h, j: -h}) - at({i: -h, j: h}) + at({i: -h, j: -h}))
            / (4 * h * h)
            if i != j
            else -(at({i: h}) - 2 * at({}) + at({i: -h})) / (h * h)
            for j in range(size)
        ]
        for i in range(size)
    ]
    covariance = bradley_terry._inverse(information)
    for i in range(size):
        for j in range(size):
            product = sum(information[i][k] * covariance[k][j] for k in range(size))
            assert product == pytest.approx(1.0 if i == j else 0.0, abs=1e-6)
    # Each rating less the mean: its variance is (P C P)_kk, P = I - 11ᵀ/n.
    mean = [sum(row) / size for row in covariance]
    total = sum(mean) / size
    for k, name in enumerate(sorted(rated)):
        spread = bradley_terry.Z * math.sqrt(covariance[k][k] - 2 * mean[k] + total) * POINTS
        assert rated[name].high - rated[name].rating == pytest.approx(spread, abs=0.2)
        assert rated[name].rating - rated[name].low == pytest.approx(spread, abs=0.2)


def test_the_ratings_average_the_mean() -> None:
    rated = fit(PAIRS)
    assert sum(r.rating for r in rated.values()) / len(rated) == pytest.approx(1000, abs=0.1)


def test_no_votes_rate_nothing() -> None:
    assert fit([]) == {}
