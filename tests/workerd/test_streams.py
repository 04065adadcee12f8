"""workerd's native streams, as the Python Worker meets them, exercised from
Python on workerd (the probe Worker's /streams/* routes run the experiments
in tests/fixtures/probe/worker/stream_probes.py). Each is a fact of the
platform that edgechat's seam (``edgechat.platform``) relies on, checked on the
runtime it ships to; what workerd does is cited from its source
(cloudflare/workerd).
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from tests.harness import EmulatorControl, Runner

SSE = ["data: 1\n\n", "data: 22\n\n", "data: 333\n\n", "data: [DONE]\n\n"]

# How long to wait for something that must happen before calling it a hang: a
# guard far above what a loaded machine needs, never a claim about speed.
HANG_GUARD_S = 20.0


def probe_json(runner: Runner, name: str, **query: str) -> Any:
    response = httpx.get(runner.base_url + f"/streams/{name}", params=query, timeout=HANG_GUARD_S)
    assert response.status_code == 200, response.text
    return response.json()


def kv_value(runner: Runner, key: str) -> Any:
    response = httpx.get(runner.base_url + "/kv", params={"key": key}, timeout=HANG_GUARD_S)
    return response.json()["value"]


def chunks_rule(*chunks: object, contains: str = "x") -> dict[str, Any]:
    return {"match": {"contains": contains}, "chunks": list(chunks)}


def test_identity_transform_stream_is_a_rendezvous_byte_pipe(probe: Runner) -> None:
    seen = probe_json(probe, "identity")
    # identity-transform-stream.c++: a write waits until a read has taken it.
    assert seen["write_pending_before_read"] is True
    assert seen["write_settled_after_read"] is True
    # Its readable is a byte stream: the read above was readAtLeast on a BYOB reader.
    assert seen["read"] == "hello "
    # internal.c++ processChunk: a str is written as UTF-8, other values are
    # refused per write and the stream stays usable; empty writes are no-ops.
    assert seen["string_read"] == "w\u00f6rld"
    assert seen["number_write"].startswith("TypeError: This TransformStream is being used as")
    assert seen["empty_write_settles_at_once"] is True
    assert seen["after_refusal"] == "still usable"
    assert seen["done_after_close"] is True
    # Cancelling the readable rejects the pending write with its reason
    # (identity-transform-stream.c++, `cancel`) and every later one as on a
    # closed stream (seen on workerd 1.20261117.1).
    assert seen["pending_write_after_cancel"] == "Error: client went away"
    assert seen["next_write_after_cancel"] == "TypeError: This WritableStream has been closed."


def test_ai_result_is_a_byte_stream_read_with_a_minimum(
    probe: Runner, probe_ai: EmulatorControl
) -> None:
    probe_ai.script(chunks_rule(*SSE))
    seen = probe_json(probe, "ai-byob", prompt="x", min="20", size="64")
    # Each read fills from as many upstream chunks as the minimum needs; a
    # short read only at EOF, then done (workerd: done=false with the bytes).
    assert seen["reads"] == [
        {"done": False, "text": SSE[0] + SSE[1] + SSE[2]},
        {"done": False, "text": SSE[3]},
        {"done": True, "bytes": 0},
    ]
    assert seen["type"] == "Uint8Array"


def test_read_at_least_on_the_ai_result(probe: Runner, probe_ai: EmulatorControl) -> None:
    probe_ai.script(chunks_rule(*SSE))
    seen = probe_json(probe, "ai-byob", prompt="x", min="15", api="readAtLeast")
    assert seen["reads"] == [
        {"done": False, "text": SSE[0] + SSE[1]},
        {"done": False, "text": SSE[2] + SSE[3]},
        {"done": True, "bytes": 0},
    ]


def test_tee_of_the_ai_result_buffers_for_the_slow_branch(
    probe: Runner, probe_ai: EmulatorControl
) -> None:
    probe_ai.script(chunks_rule(*SSE))
    seen = probe_json(probe, "ai-tee", prompt="x")
    assert seen["kinds"] == ["bytes", "bytes"]
    # Reads need not follow the emulator's chunks: over RPC its stream is
    # pumped with a draining reader, all that is queued in one write
    # (standard.c++, `pumpToImpl`); seen: the first two events in one read.
    assert "".join(seen["fast_reads"]) == "".join(SSE)
    # One BYOB read of the slow branch takes everything it has accumulated.
    assert seen["slow_first_read"] == "".join(SSE)
    assert seen["slow_then_done"] is True


def test_cancelling_the_ai_result_cancels_the_upstream(
    probe: Runner, probe_ai: EmulatorControl
) -> None:
    probe_ai.script(chunks_rule("data: 1\n\n", {"stall": True}))
    assert probe_json(probe, "ai-cancel", prompt="x") == {"first": "data: 1\n\n"}
    # The cancel reaches the emulator over RPC although it is silent; no error:
    # the stream's cancel, not the call's signal (never aborted here).
    (call,) = probe_ai.wait_for_calls(1, timeout=HANG_GUARD_S)
    assert call["aborted"] is True
    assert call["error"] is None


def test_an_upstream_error_errors_the_ai_result_without_its_message(
    probe: Runner, probe_ai: EmulatorControl
) -> None:
    probe_ai.script(chunks_rule("data: 1\n\n", {"error": "3040: busy"}))
    seen = probe_json(probe, "ai-error", prompt="x")
    # A stream returned over RPC that errors reaches the caller as a broken
    # one, its reason lost (io/external-pusher.c++, ExplicitEndInputPipeAdapter
    # ::tryRead; api/tests/js-rpc-test.js: "TODO(someday): Propagate the actual
    # error"). At the edge the binding's stream is a fetch's body
    # (src/cloudflare/internal/ai-api.ts), whose break carries no code either.
    prematurely = "Error: ReadableStream received over RPC disconnected prematurely."
    assert seen == {"first": "data: 1\n\n", "error": prematurely}
    (call,) = probe_ai.wait_for_calls(1, timeout=HANG_GUARD_S)
    assert call["error"] == "3040: busy"


def test_native_pipe_aborted_while_waiting_upstream_drops_the_source_keeps_the_body(
    probe: Runner, probe_ai: EmulatorControl
) -> None:
    probe_ai.script(chunks_rule("data: first\n\n", {"stall": True}))
    seen = probe_json(probe, "pipe-native-abort", prompt="x")
    assert seen["first"] == "data: first\n\n"
    assert seen["pipe"] == "Error: stop relaying"
    # internal.c++ handlePromise: the source is errored even with preventCancel
    # (and its upstream dropped) ...
    assert seen["source_locked"] is False
    assert seen["source_read"] == "Error: stop relaying"
    (call,) = probe_ai.wait_for_calls(1, timeout=HANG_GUARD_S)
    assert call["aborted"] is True
    assert call["error"] is None  # the stream's cancel, not the call's signal
    # ... while the destination, not aborted, still takes our closing event.
    assert seen["dest_read"] == "closing event"
    assert seen["dest_write_error"] is None


def test_native_pipe_aborted_while_a_write_waits_breaks_the_body(
    probe: Runner, probe_ai: EmulatorControl
) -> None:
    probe_ai.script(chunks_rule("data: first\n\n", {"stall": True}))
    seen = probe_json(probe, "pipe-native-abort", prompt="x", when="write-pending")
    assert seen["first"] == "d"
    assert seen["pipe"] == "Error: stop relaying"
    # identity-transform-stream.c++, `readHelper`: a read that finds the
    # pipe's write cancelled breaks the stream ("writer canceled", a
    # DISCONNECTED error, which JavaScript sees as "Network connection
    # lost."); the rest of the chunk is lost, and our write fails the same way.
    assert seen["dest_read_error"] == "Error: Network connection lost."
    assert seen["dest_write_error"] == "Error: Network connection lost."


def test_js_pipe_aborted_while_reading_drops_that_chunk(probe: Runner) -> None:
    seen = probe_json(probe, "pipe-js-abort")
    # standard.c++ pipeLoop: the signal is checked between steps only ...
    assert seen["pending_after_abort"] is True
    assert seen["pipe"] == "Error: pause"
    # ... both ends are released, neither cancelled nor aborted ...
    assert seen["source_locked"] is False
    assert seen["dest_locked"] is False
    assert seen["source_cancelled"] is None
    assert seen["dest_aborted"] is None
    assert seen["next_from_source"] == "chunk 3"
    # ... but chunk 2, read when the abort was seen, reached neither.
    assert seen["dest_chunks"] == ["chunk 1", "after"]


def test_relay_pipes_the_answer_into_the_body_then_writes_a_closing_event(
    probe: Runner, probe_ai: EmulatorControl
) -> None:
    probe_ai.script(chunks_rule(*SSE))
    response = httpx.get(probe.base_url + "/streams/relay", params={"prompt": "x"}, timeout=15)
    assert response.status_code == 200
    assert response.text == "".join(SSE) + "event: done\n\n"


def test_client_leaving_a_relay_fails_the_pipe_and_drops_the_upstream(
    probe: Runner, probe_ai: EmulatorControl
) -> None:
    paced = []
    for i in range(200):
        paced += [f"data: {i}\n\n", {"delay_ms": 20}]
    probe_ai.script(chunks_rule(*paced))
    url = probe.base_url + "/streams/relay"
    query = {"prompt": "x", "key": "relay-1"}
    with httpx.stream("GET", url, params=query, timeout=HANG_GUARD_S) as response:
        assert next(response.iter_raw()).startswith(b"data: 0")
    # workerd notices the client at its next write to it and cancels the
    # body; the pipe fails on its next write and cancels the source, which
    # drops the upstream (the stream's cancel: no error, the signal stays).
    (call,) = probe_ai.wait_for_calls(1, timeout=HANG_GUARD_S)
    assert call["aborted"] is True
    assert call["error"] is None
    deadline = time.monotonic() + HANG_GUARD_S
    while (outcome := kv_value(probe, "relay-1")) is None:
        assert time.monotonic() < deadline, "the relay's pipe did not settle"
        time.sleep(0.05)
    assert outcome == "Error: Network connection lost."
    # By then request.signal has fired: edgechat.platform.streams (`BindingUpstream.failure`)
    # tells a client who left from a model that failed by it. The pipe fails
    # only at its next write after the request ended, and the request's end
    # fires the signal (worker-entrypoint.c++, WorkerEntrypoint::request; seen
    # 30 times out of 30 on workerd 1.20261117.1).
    assert kv_value(probe, "relay-1/signal") == "fired"
