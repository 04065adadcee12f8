"""edgechat: GLM and Kimi chat at the edge, as a Python Cloudflare Worker.

A pure core (plain Python, tested on CPython) and one seam to the platform.
Nothing here does I/O at import time. The packages, top to bottom; each
imports only packages below it, and packages on one line never import each
other (``[tool.importlinter]`` in ``pyproject.toml`` checks it):

- ``web``: the HTTP surface, a routing table and one handlers module per capability;
- ``apis`` | ``history`` | ``feedback``: the APIs' shapes (each body's rules
  beside its framing) | conversations, share links and images kept on the
  server | comparisons, votes, ratings and the leaderboard;
- ``answer``: one question's answer, from the model call to the closing event;
- ``config``: the operator's settings;
- ``users`` | ``media``: who asks and what they spend | images, documents,
  speech and transcription;
- ``core``: the vocabulary all of them share (errors, models, questions,
  ports, HTTP values, JSON and SSE).

``platform`` stands beside them: the only code that imports the runtime
(``js``, ``pyodide``, ``workers``), it implements ``core.ports`` and imports
nothing but ``core``. ``src/entry.py`` joins it to ``web``.
"""
