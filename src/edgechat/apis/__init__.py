"""The APIs' shapes, each body's rules beside its framing: ``/chat``
(``chat_body``, ``chat``), Chat Completions (``openai_body``, ``openai``),
Responses (``responses_body``, ``responses``), embeddings
(``embeddings_body``, ``embeddings``); the rules they share in ``body`` and
every field name in ``fields``.

Imports ``answer`` (framings write what it hands them), ``config``,
``media`` and ``core``; never ``history`` or ``feedback`` (its siblings) or ``web``."""
