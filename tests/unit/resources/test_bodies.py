"""streaming/body.py: the SSE and deferred bodies over real RequestStreams (tests.support.bodies):
one write per wake-up, engine aborts on stop strings and early ends, errors before and after the
first byte, and a client that went away."""
from __future__ import annotations

import gevent

from engine.protocol import EngineCoreOutput
from base.errors import ServerError
from resources.completions.convert import prepare_completion
from resources.completions.render import CompletionStreamRenderer, render_completion_response
from tests.support.bodies import BodyRun
from tests.unit.resources.conftest import FRANCE

BASE = {"model": "tiny", "prompt": "The capital of France is", "temperature": 0}


def completion(ctx, **body) -> BodyRun:
    prepared = prepare_completion({**BASE, **body}, ctx)
    return BodyRun(prepared, ctx, CompletionStreamRenderer, render_completion_response)


def test_a_stream_writes_once_per_wake_up(ctx):
    run = completion(ctx, max_tokens=4, stream=True)
    run.step([FRANCE[0]])
    assert len(run.chunks) == 1
    # Three steps that arrive before the body runs again go out in one write (the plain steps
    # merged into one chunk, as vLLM's output collector merges them), with the final chunks.
    for token in FRANCE[1:3]:
        run.streams[0].deliver(EngineCoreOutput(run.streams[0].request_id, [token]))
    run.step([FRANCE[3]], 1)
    first, rest = run.chunks
    assert rest.count(b"data: ") == 2 and rest.endswith(b"data: [DONE]\n\n")
    assert b'"finish_reason":"length"' in rest and not run.client.aborted


def test_a_stop_string_aborts_the_engine_request(ctx):
    for stream in (True, False):
        run = completion(ctx, max_tokens=8, stop=["bern"], stream=stream)
        run.tokens(FRANCE[:3], finish=None)  # the engine would go on: the stop string ends it
        assert b'"stop_reason":"bern"' in run.response()
        assert run.client.aborted == [run.streams[0].request_id]


def test_an_engine_failure_after_the_first_byte_is_an_error_event(ctx):
    run = completion(ctx, max_tokens=8, stream=True, n=2, temperature=1)
    run.step([FRANCE[0]], index=0)
    run.streams[1].fail(ServerError("engine core died"))
    gevent.idle()
    body = run.response()
    assert body.endswith(b'data: {"error": {"message": "engine core died", "type": '
                         b'"InternalServerError", "param": null, "code": 500}}\n\ndata: [DONE]\n\n')
    assert run.client.aborted == [run.streams[0].request_id]  # the other choice stops too


def test_a_deferred_body_failure_is_an_error_response(ctx):
    run = completion(ctx, max_tokens=8)
    run.streams[0].fail(ServerError("engine core died"))
    status, headers, body = run.http_body.resolve(run.cancel)
    assert status == "500 Internal Server Error"
    assert b'"message":"engine core died"' in body
    assert ("Content-Length", str(len(body))) in headers


def test_a_client_that_went_away_ends_the_body_and_aborts(ctx):
    run = completion(ctx, max_tokens=8, stream=True)
    run.step([FRANCE[0]])
    run.cancel.cancel()
    body = run.response()
    assert not body.endswith(b"[DONE]\n\n")  # nobody is listening: no final chunks
    assert run.client.aborted == [run.streams[0].request_id]
    deferred = completion(ctx, max_tokens=8)
    deferred.cancel.cancel()
    status, _, body = deferred.http_body.resolve(deferred.cancel)
    assert status.startswith("499") and body == b""
    assert deferred.client.aborted == [deferred.streams[0].request_id]


def test_closing_a_body_early_aborts_what_still_runs(ctx):
    run = completion(ctx, max_tokens=8, stream=True)
    run.step([FRANCE[0]])
    run.http_body.close()
    assert run.client.aborted == [run.streams[0].request_id]


def test_a_finished_body_leaves_no_callback_on_the_cancellation(ctx):
    # The streamed body registers its own bound method: kept after the request, it made
    # body -> cancellation -> body a cycle that held the request's whole graph until a full
    # garbage collection.
    for stream in (True, False):
        run = completion(ctx, max_tokens=2, stream=stream)
        run.tokens(FRANCE[:2])
        run.response()
        run.http_body.close()  # what the WSGI server does after the last byte
        assert run.cancel._callbacks == []
        assert not run.cancel.cancelled


def test_discard_forgets_only_the_given_callback():
    from runtime.cancellation import Cancellation
    seen: list[str] = []
    cancel = Cancellation()
    cancel.on_cancel(lambda: seen.append("kept"))
    dropped = lambda: seen.append("dropped")  # noqa: E731
    cancel.on_cancel(dropped)
    cancel.discard(dropped)
    cancel.discard(dropped)  # twice is harmless
    cancel.cancel()
    assert seen == ["kept"]
