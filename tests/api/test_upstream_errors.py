"""Workers AI errors over HTTP: the status, code and Retry-After a client sees, and fallback.

The emulator throws ``"<code>: <detail>"`` like the binding does; the detail
holds a marker that must never reach the client.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.api.checks import (
    GLM,
    KIMI,
    LLAMA,
    MID_STREAM_FAILURE,
    assert_done,
    assert_error,
    assert_error_event,
    assert_meta,
    assert_relayed,
    assert_retry_after,
    assert_shape,
    assert_stream_headers,
    calls_before_a_later_request,
    chunk_of,
    post_chat,
    script_bytes,
    system_then,
    user,
)
from tests.harness import EmulatorControl
from tests.kit.upstream import native_chunk, native_end, openai_chunk, usage
from tests.kit.workers_ai import BINDING_ERRORS, FALLBACK_CODES, NO_FALLBACK_CODES

DETAIL = "internal-detail-K42 at AiBinding.run"

MAPPING = [
    (code, promised.status, promised.code, promised.retry_after)
    for code, promised in BINDING_ERRORS.items()
]


@pytest.mark.parametrize(("binding_code", "status", "code", "retry_after"), MAPPING)
def test_binding_error_before_the_stream_maps_to_status(
    client: httpx.Client,
    ai: EmulatorControl,
    binding_code: int,
    status: int,
    code: str,
    retry_after: bool,
) -> None:
    # Every model fails, so whatever the fallback chain does, this is the answer.
    ai.script({"error": f"{binding_code}: {DETAIL}"})
    chat = post_chat(client, user("hi"))
    assert_error(chat.response, status, code, "K42", "AiBinding", "internal-detail")
    if retry_after:
        assert_retry_after(chat.response)
    calls = ai.wait_for_calls(1)
    assert calls, "no upstream call was made"
    assert all(call["error"] == f"{binding_code}: {DETAIL}" for call in calls)


@pytest.mark.parametrize("message", ["9999: strange new failure K42", "Network lost K42"])
def test_unknown_binding_error_is_a_generic_502(
    client: httpx.Client, ai: EmulatorControl, message: str
) -> None:
    ai.script({"error": message})
    chat = post_chat(client, user("hi"))
    assert_error(chat.response, 502, "upstream_error", "K42", "strange", "Network")


# --- fallback -------------------------------------------------------------------------


@pytest.mark.parametrize("binding_code", FALLBACK_CODES)
def test_fallback_worthy_error_on_glm_is_answered_by_llama(
    client: httpx.Client, ai: EmulatorControl, binding_code: int
) -> None:
    ai.script(
        {"match": {"model": GLM}, "error": f"{binding_code}: {DETAIL}"},
        {"match": {"model": LLAMA}, "reply": {"content": "Llama took over."}},
    )
    chat = post_chat(client, user("hi"))
    assert_stream_headers(chat.response)
    parsed = chat.events
    # GLM refused before the stream began: meta already names the model whose
    # stream follows; done says which model was asked first.
    assert_meta(parsed, LLAMA)
    assert_shape(parsed)
    assert parsed.text() == "Llama took over."
    assert_done(parsed, LLAMA, fallback_from=GLM)
    assert b"K42" not in chat.body
    calls = ai.wait_for_calls(2)
    assert [call["model"] for call in calls] == [GLM, LLAMA]
    assert calls[0]["error"] == f"{binding_code}: {DETAIL}"
    assert calls[1]["error"] is None
    system_then([{"role": "user", "content": "hi"}], calls[1])
    assert calls[1]["inputs"]["stream"] is True
    assert calls[1]["inputs"]["max_tokens"] == 1024
    assert "max_completion_tokens" not in calls[1]["inputs"]


def test_fallback_before_any_byte_of_a_started_stream(
    client: httpx.Client, ai: EmulatorControl
) -> None:
    # The stream was returned, then failed with capacity before its first byte:
    # no token reached the client yet, so another model may still answer.
    ai.script(
        {"match": {"model": GLM}, "chunks": [{"error": f"3040: {DETAIL}"}]},
        {"match": {"model": LLAMA}, "reply": {"content": "Llama again."}},
    )
    chat = post_chat(client, user("hi"))
    parsed = chat.events
    # meta went out before GLM's stream failed: it names the model asked.
    assert_meta(parsed, GLM)
    assert_shape(parsed)
    assert parsed.text() == "Llama again."
    assert_done(parsed, LLAMA, fallback_from=GLM)
    assert b"K42" not in chat.body
    assert [call["model"] for call in ai.wait_for_calls(2)] == [GLM, LLAMA]


# What GLM says before its first words: held back, so a fallback leaves none of it.
GLM_PREAMBLE = [
    chunk_of({"role": "assistant", "content": ""}, id="glm-held-back-7Q"),
    chunk_of({}, id="glm-held-back-7Q"),
]
LLAMA_ANSWER = [
    native_chunk("Llama "),
    native_chunk("answered."),
    *native_end(prompt_tokens=4, completion_tokens=2),
]


def test_fallback_after_bytes_without_text_leaves_nothing_of_the_first_model(
    client: httpx.Client, ai: EmulatorControl
) -> None:
    # Whatever the model failed with, its stream reaches the Worker as broken
    # off (a stream carries no reason, see test_chat_stream): one case does.
    binding_code = 3040
    ai.script(
        {
            "match": {"model": GLM},
            "chunks": [*GLM_PREAMBLE, {"delay_ms": 50}, {"error": f"{binding_code}: {DETAIL}"}],
        },
        {"match": {"model": LLAMA}, "chunks": LLAMA_ANSWER},
    )
    chat = post_chat(client, user("hi"))
    parsed = chat.events
    assert_shape(parsed)
    # Between meta and done: Llama's bytes exactly, and not one of GLM's.
    assert_relayed(chat, script_bytes(LLAMA_ANSWER))
    assert b"glm-held-back-7Q" not in chat.body
    assert parsed.text() == "Llama answered."
    done = assert_done(parsed, LLAMA, fallback_from=GLM)
    assert done["usage"] == usage(4, 2)
    calls = ai.wait_for_calls(2)
    assert [call["model"] for call in calls] == [GLM, LLAMA]
    assert calls[0]["error"] == f"{binding_code}: {DETAIL}"


@pytest.mark.parametrize("binding_code", NO_FALLBACK_CODES)
def test_other_errors_do_not_fall_back(
    client: httpx.Client, ai: EmulatorControl, binding_code: int
) -> None:
    ai.script(
        {"match": {"model": GLM}, "error": f"{binding_code}: {DETAIL}"},
        {"match": {"model": LLAMA}, "reply": {"content": "must not answer"}},
    )
    chat = post_chat(client, user("hi"))
    status, code = BINDING_ERRORS[binding_code].status, BINDING_ERRORS[binding_code].code
    assert_error(chat.response, status, code, "K42")
    assert "must not answer" not in chat.body.decode()
    calls = calls_before_a_later_request(ai, client)
    assert [call["model"] for call in calls] == [GLM]


def test_when_every_model_is_busy_the_client_gets_503(
    client: httpx.Client, ai: EmulatorControl
) -> None:
    ai.script({"error": f"3040: {DETAIL}"})
    chat = post_chat(client, user("hi"))
    assert_error(chat.response, 503, "model_busy", "K42")
    assert_retry_after(chat.response)
    calls = calls_before_a_later_request(ai, client)
    assert [call["model"] for call in calls] == [GLM, LLAMA]


def test_paid_only_kimi_falls_back_to_the_chain(client: httpx.Client, ai: EmulatorControl) -> None:
    ai.script(
        {"match": {"model": KIMI}, "error": f"5035: {DETAIL}"},
        {"reply": {"content": "Free model answered."}},
    )
    parsed = post_chat(client, user("hi", model="kimi")).events
    assert_meta(parsed, GLM)
    assert_shape(parsed)
    assert parsed.text() == "Free model answered."
    assert_done(parsed, GLM, fallback_from=KIMI)
    assert [call["model"] for call in ai.wait_for_calls(2)] == [KIMI, GLM]


@pytest.mark.parametrize("later", [False, True], ids=["first-words", "later-words"])
def test_no_switch_after_a_token_was_sent(
    client: httpx.Client, ai: EmulatorControl, later: bool
) -> None:
    sent: list[Any] = [openai_chunk(content="Half")]
    if later:
        # Past the first words the platform relays the stream; still no switch.
        sent += [{"delay_ms": 100}, openai_chunk(content=" and more")]
    ai.script(
        {"match": {"model": GLM}, "chunks": [*sent, {"error": f"3040: {DETAIL}"}]},
        {"match": {"model": LLAMA}, "reply": {"content": "must not answer"}},
    )
    chat = post_chat(client, user("hi"))
    assert_stream_headers(chat.response)
    parsed = chat.events
    assert_shape(parsed, final="error")
    assert_relayed(chat, script_bytes(sent))
    assert parsed.text() == ("Half and more" if later else "Half")
    assert_error_event(parsed, MID_STREAM_FAILURE, "K42")
    assert b"K42" not in chat.body
    calls = calls_before_a_later_request(ai, client)
    assert [call["model"] for call in calls] == [GLM]
