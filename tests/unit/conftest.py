from __future__ import annotations

from hypothesis import HealthCheck, settings

# In a fresh checkout (CI) Hypothesis builds its Unicode tables on the first
# text draw (.hypothesis/unicode_data), about 1.5 s that its too_slow check
# blames on whichever property test happens to draw first. Only that check is
# off; deadlines and every other check stay as they are.
settings.register_profile("edgechat-unit", suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("edgechat-unit")
