"""The vocabulary every capability shares: the error tree (``errors``, and
Workers AI's failures in ``faults``), the model catalog (``models``), what a
validated question is (``requests``), what the core needs from the platform
(``ports``), requests and replies (``http``), strict JSON (``json_body``) and
the one SSE writer and splitter (``sse``).

Imports nothing of edgechat outside ``core``."""
