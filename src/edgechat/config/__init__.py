"""The operator's settings: every ``[vars]`` entry and secret read and
checked once (``settings``), the presets (``presets``) and the providers'
APIs named for fallback (``providers``).

Imports ``users`` (identity rules, budget limits) and ``core``."""
