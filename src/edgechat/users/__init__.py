"""Users: who asks (``identity``: keys, Cloudflare Access, admins), what
they spent today against their budgets (``budget``, in D1) and the answers
counted per day (``usage``, in KV).

Imports only ``core``; ``media`` is its sibling and never imported."""
