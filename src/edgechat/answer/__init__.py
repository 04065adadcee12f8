"""One answer to one question: the request as every handler sees it
(``context``), the pipeline (``pipeline``: cache, moderation, budgets,
documents), the models to try (``candidates``, ``providers``), the deadlines
(``deadlines``), the model's stream read (``upstream``) and delivered through
a framing (``answer``, ``delivery``, ``framing``), what is kept of it
(``recording``, ``cache``), the checks (``moderation``), prompt-cache
affinity (``affinity``), embeddings (``embedding``), and what an answer or
an embedding costs, counted after it (``billing``).

Imports ``alerts``, ``config``, ``users``, ``media`` and ``core``; never an API's
framing (``apis``) or the HTTP surface (``web``)."""
