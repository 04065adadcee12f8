"""What a signed-in user keeps on the server: conversations (``store``, in
D1, with their body rules in ``conversations``), share links (``shares``)
and images (``files``, in R2).

Imports ``media`` (image rules) and ``core``; never ``apis`` or ``feedback`` (its siblings)
or ``web``."""
