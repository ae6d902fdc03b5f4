"""``text.thread_memo.ThreadMemo``: made once per key and thread, a table per native thread,
bounded, nothing stored when making fails."""
from __future__ import annotations

import threading

import pytest

from text.thread_memo import ThreadMemo


def test_made_once_per_key():
    memo = ThreadMemo()
    made = []
    for _ in range(3):
        assert memo.get_or_make("k", lambda: made.append(1) or "v") == "v"
    assert memo.get_or_make("other", lambda: "w") == "w"
    assert made == [1]


def test_each_thread_makes_its_own():
    memo = ThreadMemo()
    memo.get_or_make("k", lambda: "main")
    seen = []
    thread = threading.Thread(target=lambda: seen.append(memo.get_or_make("k", lambda: "thread")))
    thread.start()
    thread.join()
    assert seen == ["thread"]
    assert memo.get_or_make("k", lambda: "again") == "main"


def test_bounded_and_failures_not_stored():
    memo = ThreadMemo(limit=2)
    for key in "abc":
        memo.get_or_make(key, lambda key=key: key)
    # the table started over when full: "a" is made again
    assert memo.get_or_make("a", lambda: "new a") == "new a"
    with pytest.raises(ValueError):
        memo.get_or_make("bad", lambda: (_ for _ in ()).throw(ValueError("no")))
    assert memo.get_or_make("bad", lambda: "made") == "made"
