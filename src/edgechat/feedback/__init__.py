"""What users think of the answers: comparisons of 2 or 3 models on one
question (``comparisons``: made, each slot claimed and its outcome kept, a
blind one revealed by its vote), votes and ratings (``store``, in D1, each
user's own), and the leaderboard fitted to them (``leaderboard``, its
ratings by ``bradley_terry``).

Imports ``answer`` (an answer's ``Outcome``), ``users`` and ``core``; never
``apis`` or ``history`` (its siblings) or ``web``."""
