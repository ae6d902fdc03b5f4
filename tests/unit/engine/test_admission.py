"""Queue limits (``engine.admission``): vLLM's counting rules, the shared per-worker slots, and
the registry's prefill-token count they read."""
from __future__ import annotations

from engine.admission import Admission, AdmissionRejected, Group, SharedCounts
from engine.registry import RequestRegistry
from engine.stream import RequestStream, Waker
from base.errors import ApiError
from middleware.errors import http_parts


def test_requests_limit_counts_the_groups_samples():
    limits = Admission(max_requests=4, max_tokens=None)
    assert limits.verdict(Group(2, 10), requests=2, prefill_tokens=0) is None  # 2 + 2 <= 4
    refused = limits.verdict(Group(3, 10), requests=2, prefill_tokens=0)     # 2 + 3 > 4
    assert isinstance(refused, AdmissionRejected) and refused.reason == "max_num_queued_reqs"


def test_tokens_limit_refuses_once_the_backlog_reaches_it_without_the_new_prompt():
    limits = Admission(max_requests=None, max_tokens=100)
    assert limits.verdict(Group(1, 500), requests=9, prefill_tokens=99) is None
    refused = limits.verdict(Group(1, 1), requests=0, prefill_tokens=100)
    assert refused is not None and refused.reason == "max_num_queued_tokens"


def test_a_group_is_decided_once_for_all_its_requests():
    limits = Admission(max_requests=1, max_tokens=None)
    group = Group(1, 5)
    assert limits.verdict(group, requests=0, prefill_tokens=0) is None
    # Its second engine request sees the first registered: still admitted, as a group.
    assert limits.verdict(group, requests=1, prefill_tokens=0) is None


def test_the_refusal_is_vllms_503_with_retry_after():
    status, headers, body = http_parts(AdmissionRejected("max_num_queued_reqs"))
    assert status == "503 Service Unavailable" and ("Retry-After", "1") in headers
    assert body == (b'{"error":{"message":"The engine is currently busy and cannot accept new '
                    b'requests. Please try again later or on a different instance.","type":'
                    b'"Service Unavailable","param":null,"code":503}}')
    assert isinstance(AdmissionRejected("max_num_queued_tokens"), ApiError)


def test_shared_counts_add_the_other_workers(tmp_path):
    path = str(tmp_path / "counts")
    first, second = SharedCounts(path, 0), SharedCounts(path, 1)
    first.publish(3, 40)
    second.publish(2, 7)
    assert first.others() == (2, 7) and second.others() == (3, 40)
    limits = Admission(max_requests=5, max_tokens=None, shared=first)
    assert limits.verdict(Group(1, 1), requests=3, prefill_tokens=0).reason == \
        "max_num_queued_reqs"  # 3 here + 2 there + 1 > 5


def test_registry_counts_prompt_tokens_until_the_first_output():
    seen = []
    registry = RequestRegistry([0], on_change=lambda r, t: seen.append((r, t)))
    streams = []
    for i, tokens in enumerate((10, 7)):
        stream = RequestStream(f"r{i}", -1, Waker(), lambda ids: None)
        stream.prefill_tokens = tokens
        registry.add(stream, 0)
        streams.append(stream)
    assert (registry.in_flight, registry.prefill_tokens) == (2, 17)
    registry.prefilled(streams[0])
    registry.prefilled(streams[0])  # only the first output counts
    assert registry.prefill_tokens == 7
    registry.pop("r0")
    registry.pop("r1")  # popped before any output: its prompt leaves the backlog too
    assert (registry.in_flight, registry.prefill_tokens) == (0, 0)
    assert seen[-1] == (0, 0) and seen[:2] == [(1, 10), (2, 17)]
