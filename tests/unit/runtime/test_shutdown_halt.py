"""``Drain.answer_in_flight``: before a worker halts, the requests in flight are ended with the
error and their answers are waited for (bounded), so no client sees a closed connection."""
from __future__ import annotations

import gevent

from base.errors import EngineUnavailable
from runtime import shutdown
from runtime.shutdown import Drain


def test_in_flight_requests_are_ended_and_their_answers_waited_for():
    ended = []
    drain = Drain(0.0, abort_all=ended.append)
    drain.enter()
    error = EngineUnavailable("stopping")

    def answer() -> None:
        gevent.sleep(0.05)  # the response body writes the error, then its request leaves
        drain.leave()
    gevent.spawn(answer)
    drain.answer_in_flight(error)
    assert ended == [error] and drain.active == 0


def test_without_an_error_only_the_answers_are_waited_for(monkeypatch):
    ended = []
    drain = Drain(0.0, abort_all=ended.append)
    monkeypatch.setattr(shutdown, "ANSWER_WAIT", 0.05)
    drain.enter()  # never leaves: the wait is bounded
    drain.answer_in_flight(None)
    assert ended == [] and drain.active == 1
