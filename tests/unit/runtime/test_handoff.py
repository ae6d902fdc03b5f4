"""The cross-thread hand-off: items posted from native threads arrive, in order, in the hub."""
from __future__ import annotations

import gevent
from gevent import monkey

from engine.io_thread import EngineThread
from base.handoff import HubInbox

_start_new_thread = monkey.get_original("_thread", "start_new_thread")


def test_items_from_native_threads_arrive_in_the_hub_in_order():
    received = []
    done = gevent.event.Event()
    total = 3 * 2000

    def handle(items):
        received.extend(items)
        if len(received) >= total:
            done.set()

    inbox = HubInbox(handle)

    def produce(tag):
        for i in range(2000):
            inbox.post((tag, i))

    for tag in range(3):
        _start_new_thread(produce, (tag,))
    assert done.wait(10)
    for tag in range(3):
        assert [i for t, i in received if t == tag] == list(range(2000))
    inbox.close()


def test_engine_thread_runs_calls_in_its_own_hub_and_stops():
    import threading
    main_hub = gevent.get_hub()
    seen = []
    back = gevent.event.Event()
    inbox = HubInbox(lambda items: back.set())

    def started(thread):
        seen.append(("main", threading.get_ident(), gevent.get_hub() is not main_hub))

    thread = EngineThread(started)
    thread.start()
    thread.call(lambda: (seen.append(("call", threading.get_ident())), inbox.post(1)))
    assert back.wait(5)
    assert seen[0][2] is True
    assert seen[0][1] == seen[1][1] != threading.get_ident()
    thread.stop()
    inbox.close()
