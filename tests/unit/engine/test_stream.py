"""Request streams: outputs a response has not taken yet are merged into one when nothing but
tokens (and a finish) sets them apart, so a response that fell behind writes one chunk."""
from __future__ import annotations

from engine.protocol import FinishReason
from engine.protocol.outputs import EngineCoreOutput, LogprobsLists, PrefillStats
from engine.stream import RequestStream, Waker


def _stream() -> RequestStream:
    return RequestStream("r-1", 0, Waker(), lambda ids: None)


def _out(ids, **kw) -> EngineCoreOutput:
    return EngineCoreOutput(request_id="r-1", new_token_ids=list(ids), **kw)


def test_plain_steps_merge_into_one_output_with_the_last_finish():
    stream = _stream()
    stream.deliver(_out([5], prefill_stats=PrefillStats(num_cached_tokens=3)))
    stream.deliver(_out([6, 7]))
    stream.deliver(_out([8], finish_reason=FinishReason.STOP, stop_reason=8))
    [(merged, frames)] = stream.take()
    assert merged.new_token_ids == [5, 6, 7, 8]
    assert merged.finish_reason == FinishReason.STOP and merged.stop_reason == 8
    assert merged.prefill_stats.num_cached_tokens == 3
    assert frames is None
    assert stream.take() == []


def test_a_step_with_logprobs_is_never_merged_and_keeps_its_frames():
    stream = _stream()
    logprobs = LogprobsLists(logprob_token_ids=[[5]], logprobs=[[-0.5]], sampled_token_ranks=[1])
    stream.deliver(_out([1]))
    stream.deliver(_out([2]))
    stream.deliver(_out([3], new_logprobs=logprobs), frames=["aux"])
    stream.deliver(_out([4]))
    taken = stream.take()
    assert [o.new_token_ids for o, _ in taken] == [[1, 2], [3], [4]]
    assert taken[1][0].new_logprobs is logprobs and taken[1][1] == ["aux"]


def test_prefill_stats_start_a_new_run_and_a_single_output_is_untouched():
    stream = _stream()
    first = _out([1])
    stream.deliver(first, frames=["f"])
    assert stream.take() == [(first, ["f"])]
    stream.deliver(_out([2]))
    stream.deliver(_out([3], prefill_stats=PrefillStats(num_cached_tokens=1)))
    assert [o.new_token_ids for o, _ in stream.take()] == [[2], [3]]


def test_a_run_merges_without_touching_the_outputs_it_was_made_of_and_ends_at_each_take():
    stream = _stream()
    first = _out([1])
    stream.deliver(first)
    stream.deliver(_out([2]))
    [(merged, _)] = stream.take()
    assert merged.new_token_ids == [1, 2] and first.new_token_ids == [1]
    stream.deliver(_out([3]))
    stream.deliver(_out([4], finish_reason=FinishReason.LENGTH))
    [(merged, _)] = stream.take()
    assert merged.new_token_ids == [3, 4] and merged.finish_reason == FinishReason.LENGTH
    assert stream.finished and stream.take() == []


def test_requests_aborted_by_external_id_end_with_finish_reason_abort():
    from engine.registry import RequestRegistry
    from engine.stream import end_aborted
    registry = RequestRegistry([0])
    waker = Waker()
    streams = {rid: RequestStream(rid, -1, waker, lambda ids: None) for rid in (
        "cmpl-a-0-0000aa01", "0_chatcmpl-b-12345678", "1_chatcmpl-b-9abcdef0",
        "generate-tokens-c-00000000", "cmpl-a-1-00000000")}
    for stream in streams.values():
        registry.add(stream, 0)
    popped = registry.pop_external(["cmpl-a-0", "chatcmpl-b", "nobody"])
    assert sorted(s.request_id for s in popped) == [
        "0_chatcmpl-b-12345678", "1_chatcmpl-b-9abcdef0", "cmpl-a-0-0000aa01"]
    assert registry.in_flight == 2
    end_aborted(popped)
    for stream in popped:
        (output, _), = stream.take()
        assert stream.finished and output.finish_reason == 2 and output.new_token_ids == []
