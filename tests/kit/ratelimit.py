"""Rate-limit tests and the limiter's windows.

The rate-limit binding counts in fixed windows aligned to the wall clock
(wrangler's local limiter: ``epoch = floor(now / period)``, miniflare's
``ratelimit-object.worker.js``), so a burst that straddles a window's end is
counted in two windows and the request that should be refused passes. A test
that needs its burst counted in one window first waits for a fresh one when
too little of the current window is left.
"""

from __future__ import annotations

import time

__all__ = ["in_one_window"]


def in_one_window(period_s: float = 60.0, needed_s: float = 20.0) -> None:
    """Returns once at least ``needed_s`` of the current window are left,
    waiting for the next window to begin if they are not."""
    left = period_s - time.time() % period_s
    if left < needed_s:
        time.sleep(left + 0.05)  # the next window starts then: an event of the clock
