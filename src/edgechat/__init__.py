"""edgechat: GLM and Kimi chat at the edge, as a Python Cloudflare Worker.

The package is a pure core (plain Python, tested on CPython) plus one seam
module that talks to the platform. Nothing here does I/O at import time.
"""
