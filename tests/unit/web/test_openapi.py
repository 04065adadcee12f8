"""``static/openapi.json``: a valid OpenAPI 3.1 document that lists exactly
the routes of the Worker's routing table, each with the methods it takes."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from openapi_spec_validator import validate
from openapi_spec_validator.versions.shortcuts import get_spec_version

from edgechat.core import errors
from edgechat.core.models import CATALOG
from edgechat.core.requests import Limits
from edgechat.web.app import NESTED, PREFIXED, ROUTES, SUFFIXED
from tests.kit.conformance import DOCUMENT, Conformance

SPEC: dict[str, Any] = json.loads(DOCUMENT.read_text())
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def test_the_document_is_valid_openapi_3_1() -> None:
    version = get_spec_version(SPEC)
    assert (version.major, version.minor) == ("3", "1")
    validate(SPEC)


def test_it_is_written_as_the_house_writes_json() -> None:
    text = DOCUMENT.read_text()
    assert text.endswith("}\n")
    lines = text.splitlines()
    assert all((len(line) - len(line.lstrip(" "))) % 2 == 0 for line in lines)
    assert "\t" not in text


def _template(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "*", path)


def _documented() -> dict[str, set[str]]:
    return {
        _template(path): {m.upper() for m in item if m in METHODS}
        for path, item in SPEC["paths"].items()
    }


def _routed() -> dict[str, set[str]]:
    routes = {path: set(methods) for path, methods in ROUTES.items()}
    routes |= {prefix + "*": set(methods) for prefix, methods in PREFIXED.items()}
    routes |= {f"{prefix}*{middle}*": set(methods) for (prefix, middle), methods in NESTED.items()}
    routes |= {f"{prefix}*{suffix}": set(methods) for (prefix, suffix), methods in SUFFIXED.items()}
    return routes


def test_every_route_of_the_worker_is_documented_with_its_methods() -> None:
    documented = _documented()
    for path, methods in _routed().items():
        assert documented.get(path) == methods, path


def test_everything_documented_is_a_route_or_a_static_asset() -> None:
    static = {"/openapi.json"}  # served by the assets router, never the Worker
    assert set(_documented()) - static == set(_routed())


def test_every_operation_is_named_and_can_fail_generically() -> None:
    names = []
    for path, item in SPEC["paths"].items():
        for method in METHODS:
            operation = item.get(method)
            if operation is None:
                continue
            names.append(operation["operationId"])
            if path != "/openapi.json":
                assert "500" in operation["responses"], (method, path)
    assert len(names) == len(set(names))


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [ref for value in node.values() for ref in _refs(value)]
    if isinstance(node, list):
        return [ref for value in node for ref in _refs(value)]
    return []


def test_every_reference_resolves_and_every_component_is_used() -> None:
    refs = set(_refs(SPEC))
    for ref in refs:
        node: Any = SPEC
        for part in ref.removeprefix("#/").split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
    components = {
        f"#/components/{kind}/{name}"
        for kind, entries in SPEC["components"].items()
        if kind != "securitySchemes"
        for name in entries
    }
    assert components - refs == set()


def _sse_media() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path, item in SPEC["paths"].items():
        for method in METHODS:
            for status, response in item.get(method, {}).get("responses", {}).items():
                media = response.get("content", {}).get("text/event-stream")
                if media is not None:
                    found.append((f"{method} {path} {status}", media))
    return found


def test_each_stream_names_a_schema_for_each_of_its_events() -> None:
    streams = dict(_sse_media())
    assert set(streams) == {
        "post /chat 200",
        "post /v1/chat/completions 200",
        "post /v1/responses 200",
    }
    assert set(streams["post /chat 200"]["x-sse-events"]) == {"meta", "message", "done", "error"}
    for media in streams.values():
        assert media["x-sse-events"], media


@pytest.mark.parametrize(
    ("method", "path", "status", "body", "problem"),
    [
        ("GET", "/healthz", 200, {"status": "ok"}, None),
        ("GET", "/healthz", 200, {"status": "nok"}, "$.status"),
        ("POST", "/chat", 418, {}, "status 418 is not documented"),
        ("POST", "/chat", 400, {"error": {"code": "nope", "message": "x"}}, "$.error.code"),
        ("GET", "/nothing-here", 404, {"error": {"code": "not_found", "message": "x"}}, None),
        ("GET", "/nothing-here", 404, {"error": {"code": "gone", "message": "x"}}, "$.error.code"),
        ("POST", "/v1/models", 405, {"error": {"code": "method_not_allowed"}}, "Allow says"),
    ],
)
def test_the_checker_names_the_operation_status_and_json_path(
    method: str, path: str, status: int, body: Any, problem: str | None
) -> None:
    headers = {"content-type": "application/json"}
    found, _ = Conformance(SPEC).check(method, path, status, headers, json.dumps(body).encode())
    if problem is None:
        assert found == []
    else:
        assert len(found) >= 1, found
        assert problem in found[0], found


def test_the_event_checker_reads_events_as_they_arrive() -> None:
    headers = {"content-type": "text/event-stream; charset=utf-8"}
    found, events = Conformance(SPEC).check("POST", "/chat", 200, headers, None)
    assert found == []
    assert events is not None
    stream = (
        b'event: meta\ndata: {"request_id":"r1","model":"m"}\n\n: ping\n\n'
        b'data: {"any":"model event"}\r\n\r\n'
        b'event: done\ndata: {"forged":true}\n\n'  # no request id: the model's words
        b'event: done\ndata: {"request_id":"r1","model":"m"}\n\n'
    )
    for cut in range(0, len(stream), 7):
        events.feed(stream[cut : cut + 7])
    assert events.take() == [
        "POST /chat (postChat) 200 event 'done': $: 'finish_reason' is a required property"
    ]


def _subclasses(cls: type) -> list[type]:
    return [cls, *(sub for child in cls.__subclasses__() for sub in _subclasses(child))]


def test_the_error_codes_are_the_hierarchys() -> None:
    codes = {cls.code for cls in _subclasses(errors.EdgechatError)}
    assert set(SPEC["components"]["schemas"]["ErrorCode"]["enum"]) == codes


RESPONSES = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    410: "Gone",
    412: "PreconditionFailed",
    413: "PayloadTooLarge",
    415: "UnsupportedMediaType",
    428: "PreconditionRequired",
    429: "TooManyRequests",
    500: "InternalError",
    502: "BadGateway",
    503: "ServiceUnavailable",
    504: "GatewayTimeout",
}


def test_each_status_names_the_codes_the_hierarchy_gives_it() -> None:
    by_status: dict[int, set[str]] = {}
    for cls in _subclasses(errors.EdgechatError):
        by_status.setdefault(cls.status, set()).add(cls.code)
    assert set(by_status) == {*RESPONSES, 405}
    for status, name in RESPONSES.items():
        response = SPEC["components"]["responses"][name]
        schema = response["content"]["application/json"]["schema"]
        assert set(schema["properties"]["error"]["properties"]["code"]["enum"]) == by_status[status]


def test_the_limits_are_the_defaults_of_the_code() -> None:
    limits = SPEC["components"]["schemas"]["Limits"]
    assert {k: v["default"] for k, v in limits["properties"].items()} == Limits().to_json()
    assert limits["required"] == list(Limits().to_json())


def test_the_model_names_are_the_catalogs() -> None:
    names = SPEC["components"]["schemas"]["ModelName"]["enum"]
    assert names == ["auto", *(m.alias for m in CATALOG), *(m.id for m in CATALOG), None]


def test_a_streams_event_schema_says_what_its_x_sse_events_says() -> None:
    for where, media in _sse_media():
        schema = media["schema"]
        named = {}
        for branch in schema["allOf"]:
            name = branch["if"]["properties"]["event"]["const"]
            data = branch["then"]["properties"]["data"]
            named[name] = data.get("else", data).get("contentSchema", {"type": "string"})
        assert schema["properties"]["event"]["enum"] == list(media["x-sse-events"]), where
        for name, data in media["x-sse-events"].items():
            assert named[name] in (data, {"type": "string"}), (where, name)


def test_a_limit_refusal_names_a_limit_of_api_limits() -> None:
    limit = SPEC["components"]["schemas"]["ErrorDetail"]["properties"]["limit"]
    assert limit["enum"] == list(Limits().to_json())
