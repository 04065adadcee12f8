"""The HTTP surface: the routing table and one request's way through it
(``app``), the checks before a request may cost anything (``guards``), the
steps every handler takes (``steps``), and one handlers module per
capability: ``site``, ``answers``, ``media``, ``account``, ``history``.

The top layer: it may import every package but ``platform``."""
