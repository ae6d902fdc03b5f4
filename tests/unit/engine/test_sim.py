"""engine.sim as a real subprocess, driven over real ZMQ sockets the test binds
(``tests.support.sim_driver``): its registration, generation, utility calls and LoRA requests.
Bad input, faults, switches and the handshake: ``test_sim_faults.py``."""

from __future__ import annotations

from typing import Any

import msgspec

from engine.protocol import FinishReason, LoRARequest, logprobs_lists_to_python
from tests.support.sim_driver import EOS, FAST, PROMPT, STATS_KEYS, Sim, tokens_of
from tests.support.sim_driver import shared, start, workdir  # noqa: F401  (fixtures)


# ---------------------------------------------------------------- registration


def test_registration_has_all_25_keys(start: Any) -> None:
    sim = start("--rank", "1", "--max-model-len", "2048", "--num-gpu-blocks", "100", "--block-size", "32",
                "--max-num-seqs", "8", "--data-parallel-size", "2", "--vllm-version", "0.32.0")
    assert sim.identity == b"\x01\x00"
    raw = sim.registration
    assert (raw.max_model_len, raw.num_gpu_blocks, raw.block_size) == (2048, 100, 32)
    assert (raw.data_parallel_rank, raw.data_parallel_size, raw.max_num_seqs) == (1, 2, 8)
    assert raw.vllm_version == "0.32.0" and raw.kv_cache_size_tokens == 3200
    assert "engine.sim rank=1 ready" in sim.log()


# ------------------------------------------------------------------- generation


def test_echo_streams_prompt_and_finishes_length(shared: Sim) -> None:
    shared.add("echo-1", max_tokens=5)
    outs = shared.collect("echo-1")
    assert tokens_of(outs) == [501, 502, 503, 501, 502]
    assert all(len(o.new_token_ids) == 1 for o, _, _ in outs)
    assert outs[-1][0].finish_reason == FinishReason.LENGTH and outs[-1][0].stop_reason is None
    first = outs[0][0]
    assert first.prefill_stats.num_prompt_tokens == 4
    assert [e.type for e in first.events] == [1, 2]
    assert all(o.events is None and o.prefill_stats is None for o, _, _ in outs[1:])
    for _, frames, msg in outs:
        assert msg.weight_version == "default" and msg.engine_index == 0
        # Complete stats map on every step message (vllm-rs requires every key).
        assert list(msgspec.msgpack.decode(frames[0])[2]) == STATS_KEYS
        assert len(msgspec.msgpack.decode(frames[0])[1][0]) == 18  # 0.32 shape
    # Going idle after a finish: one stats-only message.
    frames, msg = shared.recv(2.0)
    assert msg.outputs == [] and msg.scheduler_stats.num_running_reqs == 0


def test_eos_after_finishes_stop_without_stop_reason(shared: Sim) -> None:
    shared.add("eos-1", max_tokens=10, eos_token_id=EOS, all_stop_token_ids=[EOS], extra_args={"sim_eos_after": 3})
    outs = shared.collect("eos-1")
    assert tokens_of(outs) == [501, 502, EOS]
    assert outs[-1][0].finish_reason == FinishReason.STOP and outs[-1][0].stop_reason is None


def test_stop_token_ids_and_mintokens_of(shared: Sim) -> None:
    shared.add("stop-1", max_tokens=10, stop_token_ids=[503])
    outs = shared.collect("stop-1")
    assert tokens_of(outs) == [501, 502, 503]
    assert outs[-1][0].finish_reason == FinishReason.STOP and outs[-1][0].stop_reason == 503
    # min_tokens masks stop tokens: 502 cannot end the request at position 2.
    shared.add("stop-2", max_tokens=10, stop_token_ids=[502], min_tokens=2)
    toks = tokens_of(shared.collect("stop-2"))
    assert toks[0] == 501 and toks[1] != 502 and toks[2:] == [503, 501, 502]


def test_sim_tokens_then_eos_and_ignore_eos(shared: Sim) -> None:
    shared.add("list-1", max_tokens=10, eos_token_id=EOS, extra_args={"sim_tokens": [7, 8]})
    outs = shared.collect("list-1")
    assert tokens_of(outs) == [7, 8, EOS] and outs[-1][0].finish_reason == FinishReason.STOP
    # ignore_eos: the frontend omits _eos_token_id, so the list cycles until max_tokens.
    shared.add("list-2", max_tokens=5, ignore_eos=True, extra_args={"sim_tokens": [7, 8]})
    outs = shared.collect("list-2")
    assert tokens_of(outs) == [7, 8, 7, 8, 7] and outs[-1][0].finish_reason == FinishReason.LENGTH


def test_script_tokens_answer_every_request_without_its_own_list(start: Any) -> None:
    sim = start(*FAST, "--script-tokens", "7,8,9")
    sim.add("script-1", max_tokens=10, eos_token_id=EOS)
    assert tokens_of(sim.collect("script-1")) == [7, 8, 9, EOS]
    sim.add("script-2", max_tokens=4, ignore_eos=True)
    assert tokens_of(sim.collect("script-2")) == [7, 8, 9, 7]
    # A request's own sim_tokens still win.
    sim.add("script-3", max_tokens=2, ignore_eos=True, extra_args={"sim_tokens": [5]})
    assert tokens_of(sim.collect("script-3")) == [5, 5]


def test_random_mode_is_deterministic_and_ordinary(shared: Sim) -> None:
    shared.add("rnd-a", max_tokens=6, seed=7, extra_args={"sim_output_mode": "random"})
    first = tokens_of(shared.collect("rnd-a"))
    shared.add("rnd-b", max_tokens=6, seed=7, extra_args={"sim_output_mode": "random"})
    assert tokens_of(shared.collect("rnd-b")) == first
    assert all(1000 <= t < 131072 for t in first) and len(set(first)) > 1


def test_max_model_len_caps_output(shared: Sim, start: Any) -> None:
    sim = start(*FAST, "--max-model-len", "7")
    sim.add("cap-1", max_tokens=100)
    outs = sim.collect("cap-1")
    assert len(tokens_of(outs)) == 3 and outs[-1][0].finish_reason == FinishReason.LENGTH


def test_abort_stops_output(shared: Sim) -> None:
    # A companion request keeps the simulator stepping: once a step comes without abort-1 (which
    # had 998 tokens to go), the abort has been applied, and no later step may carry it. Steps
    # already queued on the socket when the abort arrived may still carry it; that is not a leak.
    shared.add("abort-1", max_tokens=1000)
    shared.add("abort-companion", max_tokens=1000)
    got = 0
    while got < 2:
        _, msg = shared.recv(2.0)
        got += sum(1 for o in msg.outputs if o.request_id == "abort-1")
    shared.abort("abort-1")
    applied, companion_steps = False, 0
    while companion_steps < 20:
        received = shared.recv(5.0)
        assert received is not None, "the simulator stopped stepping the companion request"
        ids = {o.request_id for o in received[1].outputs}
        if "abort-companion" in ids:
            companion_steps += 1
        if "abort-1" not in ids and ids:
            applied = True
        assert not (applied and "abort-1" in ids), "abort-1 came back after its abort was applied"
    assert applied
    shared.abort("abort-companion")
    assert shared.call("is_sleeping").result == [None, False]


def test_sim_error_after(shared: Sim) -> None:
    shared.add("err-1", max_tokens=10, extra_args={"sim_error_after": 2})
    outs = shared.collect("err-1")
    assert tokens_of(outs) == [501, 502]
    assert outs[-1][0].finish_reason == FinishReason.ERROR and outs[-1][0].new_token_ids == []


def test_logprobs_shapes(shared: Sim) -> None:
    shared.add("lp-1", max_tokens=3, logprobs=3, prompt_logprobs=2)
    outs = shared.collect("lp-1")
    for i, (out, frames, _) in enumerate(outs):
        lists = out.new_logprobs
        assert [lists.logprob_token_ids[0], lists.logprobs[0], lists.sampled_token_ranks[0]] == ["<i4", "<f4", "<i8"]
        ids, lps, ranks = logprobs_lists_to_python(lists, frames)
        assert len(ids) == 1 and len(ids[0]) == 4 and ranks == [1]
        assert ids[0][0] == out.new_token_ids[0]
        assert all(v < 0 for v in lps[0]) and lps[0][1:] == sorted(lps[0][1:], reverse=True)
        assert (out.new_prompt_logprobs_tensors is not None) == (i == 0)
    tensors = outs[0][0].new_prompt_logprobs_tensors
    assert [tensors.logprob_token_ids[0], tensors.logprobs[0]] == ["int32", "float32"]
    ids, lps, ranks = logprobs_lists_to_python(tensors, outs[0][1])
    assert [row[0] for row in ids] == PROMPT[1:] and len(ids[0]) == 3 and len(ranks) == 3
    # Big top-k: arrays of >= 256 bytes travel as aux frames, like vLLM.
    shared.add("lp-2", max_tokens=1, logprobs=80)
    (out, frames, _), = shared.collect("lp-2")
    assert len(frames) == 3 and out.new_logprobs.logprob_token_ids[2] == 1
    ids, lps, _ = logprobs_lists_to_python(out.new_logprobs, frames)
    assert len(ids[0]) == 81 and ids[0][0] == out.new_token_ids[0]


# ---------------------------------------------------------------------- utility


def test_utility_replies(shared: Sim) -> None:
    assert shared.call("reset_mm_cache").result == [None, None]
    reply = shared.call("get_supported_tasks")
    assert reply.failure_message is None and reply.value == ["generate"]
    assert shared.call("reset_prefix_cache", False, False).value is True
    assert shared.call("is_sleeping").value is False
    assert shared.call("sleep", 1, "abort").result == [None, None]
    assert shared.call("is_sleeping").value is True
    assert shared.call("wake_up", None).value is True
    assert shared.call("is_sleeping").value is False
    assert shared.call("add_lora", LoRARequest("l1", 3, "/x")).value is True
    assert shared.call("list_loras").value == [3]
    assert shared.call("remove_lora", 3).value is True
    assert shared.call("list_loras").value == []
    assert shared.call("get_weight_version").value == "default"
    assert shared.call("profile", True, None, None, None).result == [None, None]
    reply = shared.call("no_such_method")
    assert reply.result is None
    assert reply.failure_message == (
        "Call to no_such_method method failed: 'EngineCoreProc' object has no attribute 'no_such_method'"
    )
    # 0.33-only method on a 0.32 simulator.
    assert "no attribute 'pause_generation'" in shared.call("pause_generation").failure_message


def test_pause_keep_holds_requests_until_resume(shared: Sim) -> None:
    assert shared.call("pause_scheduler", "keep", False).result == [None, None]
    assert shared.call("is_scheduler_paused").value is True
    shared.add("paused-1", max_tokens=2)
    assert shared.recv(0.15) is None
    assert shared.call("resume_scheduler").result == [None, None]
    assert tokens_of(shared.collect("paused-1")) == [501, 502]
    assert shared.call("is_scheduler_paused").value is False


def test_pause_abort_ends_requests_with_abort(shared: Sim) -> None:
    shared.add("pa-1", max_tokens=1000)
    while not any(o.request_id == "pa-1" for o in shared.recv(2.0)[1].outputs):
        pass
    assert shared.call("pause_scheduler", "abort", True).result == [None, None]
    aborts = [(o, m) for m in shared.skipped for o in m.outputs if o.finish_reason is not None]
    assert len(aborts) == 1
    out, msg = aborts[0]
    assert (out.request_id, out.finish_reason, out.new_token_ids) == ("pa-1", FinishReason.ABORT, [])
    assert msg.finished_requests == ["pa-1"]
    assert shared.call("resume_scheduler").result == [None, None]
    while shared.recv(0.1) is not None:  # the idle stats-only message
        pass


def test_lora_requests(start: Any) -> None:
    sim = start(*FAST, "--enable-lora", "--verbose")
    assert sim.call("add_lora", LoRARequest("l1", 3, "/x")).value is True
    sim.add("lora-1", max_tokens=2, lora=LoRARequest("l1", 3, "/x"))
    assert tokens_of(sim.collect("lora-1")) == [501, 502]
    assert "ADD lora-1 " in sim.log() and " lora=l1:3" in sim.log()
    # Never added: a real engine's LoRA manager loads it from lora_path when it is scheduled.
    sim.add("lora-2", max_tokens=2, lora=LoRARequest("l9", 9, "/y"))
    assert tokens_of(sim.collect("lora-2")) == [501, 502]
    assert "lora-2: LoRA id 9 ('l9') was never added; loading it on demand from '/y'" in sim.log()
    assert sim.call("list_loras").value == [3, 9]
    # vLLM's LoRARequest refuses id 0 while decoding the ADD.
    sim.add("lora-3", max_tokens=2, lora=LoRARequest("l0", 0, "/z"))
    sim.add("lora-4", max_tokens=1)
    assert [o.request_id for o, _, _ in sim.collect("lora-4")] == ["lora-4"]
    assert "ignoring request: lora-3: invalid lora_request" in sim.log()


def test_lora_request_without_lora_support_is_ignored(shared: Sim) -> None:
    shared.add("nolora-1", max_tokens=2, lora=LoRARequest("l1", 1, "/x"))
    assert tokens_of(shared.collect("nolora-1")) == [501, 502]
    assert "nolora-1: LoRA is not enabled; lora_request 'l1' (id 1) ignored" in shared.log()
    while shared.recv(0.1) is not None:  # the idle stats-only message
        pass


def test_greedy_requests_repeat_per_prompt_and_sampled_ones_differ(shared: Sim) -> None:
    """As a real engine: argmax depends on the prompt (and the adapter), not the request."""
    random = {"sim_output_mode": "random"}

    def tokens(rid: str, prompt: list[int] = PROMPT, **sp: Any) -> list[int]:
        shared.add(rid, prompt, max_tokens=6, extra_args=random, **sp)
        return tokens_of(shared.collect(rid))

    greedy = tokens("greedy-a")
    assert tokens("greedy-b") == greedy and len(set(greedy)) > 1
    assert tokens("greedy-c", [1, 2, 3]) != greedy
    adapter = LoRARequest("ad", 7, "/ad")
    shared.add("greedy-lora", PROMPT, lora=adapter, max_tokens=6, extra_args=random)
    assert tokens_of(shared.collect("greedy-lora")) != greedy
    sampled = tokens("sampled-a", temperature=1.0)
    assert tokens("sampled-b", temperature=1.0) != sampled
    assert tokens("seeded-a", temperature=1.0, seed=3) == tokens("seeded-b", temperature=1.0,
                                                                   seed=3)
