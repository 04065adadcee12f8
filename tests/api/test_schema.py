"""schemathesis against the runner: cases generated from ``static/openapi.json``
for every operation, valid and invalid, each answer held to the document.

The checks: every status is documented, every content type is one the
response lists, every body (and every event of a stream) matches its
schema, no 5xx, and a method a path does not list is 405 with ``Allow``.
The document's request examples are sent first, so every answer route is
also asked a valid question (and streams one). A runner of its
own: a named key (every route answers its owner, ``/v1`` included), no rate
limiter (one client sends every case: the limiter is ``test_protection.py``'s),
no budgets; the writes of the history routes change nothing but its own
local D1 and R2, thrown away when the module ends.

Bounded: ``MAX_EXAMPLES`` cases an operation (``EDGECHAT_SCHEMA_EXAMPLES``
changes it), derandomized, so a run is the same cases every time and a
failure comes back with the next run. Exclusions, each with its reason:
``EXCLUDED`` (operations: none) and ``SKIPPED_CHECKS`` (a check left out
for one operation). What a schema cannot generate is not an exclusion but
goes untried here: a valid image for ``PUT /api/files/{id}``, real audio
for the transcription routes (their 400s are checked); ``test_files.py``
and ``test_transcription.py`` send those.
"""

from __future__ import annotations

import os

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    allow_header_conformance,
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from tests.api.conftest import ServerPool
from tests.kit.conformance import DOCUMENT

TOKEN = "schema-token-3f8a61c0e2d94b57"
MAX_EXAMPLES = int(os.environ.get("EDGECHAT_SCHEMA_EXAMPLES", "25"))
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    # A method a path does not list is 405 with Allow; a preflight's Allow
    # names the path's methods.
    unsupported_method,
    allow_header_conformance,
]
# Operations left out, by operationId, and why (none: every operation is generated).
EXCLUDED: dict[str, str] = {}
# Checks left out for one operation (its label), and why.
_ASSETS = (
    "a static asset: the platform's assets router answers a method other than GET and "
    "HEAD with an empty 405 and no Allow (workerd 1.20261117.1, the edge's router), "
    "before the Worker runs"
)
SKIPPED_CHECKS = {
    "GET /": {unsupported_method: _ASSETS},
    "GET /openapi.json": {unsupported_method: _ASSETS},
}


# Loaded at import, so each operation is a test of its own (schemathesis'
# lazy ``from_fixture`` sets ``Item._nodeid``, which pytest 9 no longer has).
schema = schemathesis.openapi.from_path(DOCUMENT)
schema.config.update(headers={"Authorization": f"Bearer {TOKEN}"}, request_timeout=60)
schema.config.generation.update(max_examples=MAX_EXAMPLES, deterministic=True)
if EXCLUDED:
    schema = schema.exclude(operation_id=list(EXCLUDED))


@pytest.fixture(scope="module")
def base_url(servers: ServerPool) -> str:
    return servers.get({"API_KEYS": f"schema:{TOKEN}"}, rate_limited=False).url


@pytest.mark.timeout(300)
@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    # The larger bodies (a conversation, a Chat Completions request) are slow
    # to generate on a busy 2-core machine; the suite's autouse fixtures are
    # per test, not per case. Neither says anything about the API.
    suppress_health_check=list(HealthCheck),
)
def test_every_answer_keeps_the_document(case: schemathesis.Case, base_url: str) -> None:
    skipped = SKIPPED_CHECKS.get(case.operation.label, {})
    checks = [check for check in CHECKS if check not in skipped]
    case.call_and_validate(base_url=base_url, checks=checks)
