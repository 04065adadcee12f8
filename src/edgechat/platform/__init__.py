"""The one seam to the Workers runtime: the only package that imports
``js``, ``pyodide`` and ``workers``. It implements ``core.ports`` over the
bindings (``ai``: AI and fetch; ``bindings``: the rate limiter, KV, R2, D1,
Vectorize),
moves the model's stream (``streams``), and turns the runtime's request into
an ``Incoming`` and a ``Reply`` into a ``Response`` (``worker``); ``interop``
has the small crossings between Python and JavaScript they share.

Imports only ``core``. Its primitives are checked on workerd itself
(``tests/workerd``)."""
