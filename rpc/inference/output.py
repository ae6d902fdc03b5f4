"""Engine outputs -> ``vllm.GenerateResponse`` messages.

The output state is the /inference/v1/generate one (``resources.generate.render.GenerateState``
in text mode: incremental detokenization, stop strings cut from the text while their token stays
in the ids, the EOS id in the ids and not in the text); only the logprobs are kept as positions
instead of JSON, since the messages carry them as parallel arrays. Field rules, as vLLM 0.32's
Rust frontend writes them: ``text`` unless ``output_text`` is false, ``token_ids`` with
``output_token_ids``, ``num_tokens`` always; ``finish_info`` on a sequence's last message with
``num_cached_tokens`` even when 0; an EOS stop names the last token as ``eos_token_id``; a
repetition stop is ABORTED. Prompt logprobs start with an empty first position.

Runs on: the HTTP hub.
"""
from __future__ import annotations

from typing import Any, Iterator

from google.protobuf.struct_pb2 import Struct

from streaming.logprobs import Position
from streaming.output import ChoiceDelta
from resources.generate.render import GenerateState
from rpc.proto import inference_pb2 as pb

_FINISH = {"length": pb.FinishInfo.LENGTH, "stop": pb.FinishInfo.STOP,
           "abort": pb.FinishInfo.ABORTED, "repetition": pb.FinishInfo.ABORTED}


class GrpcOutputState(GenerateState):
    """The generate endpoint's output state, keeping a delta's logprob positions raw."""

    def _stream_logprobs(self, state: Any, ids: list[int], positions: list[Position],
                         first: bool) -> list[Position] | None:
        return positions if self.prepared.logprobs is not None else None


def prompt_info(state: GrpcOutputState, options: pb.ResponseOptions) -> pb.PromptInfo:
    """The first message's ``prompt_info``."""
    choice = state.choices[0]
    ids = choice.choice.prompt_token_ids
    info = pb.PromptInfo(num_prompt_tokens=len(ids))
    if options.prompt_token_ids:
        info.token_ids.extend(ids)
    if options.prompt_logprobs and choice.prompt_positions is not None:
        positions = choice.prompt_positions
        for position in positions:
            if position is None:  # the first prompt token has no score
                info.logprobs.append(0.0)
                info.ranks.append(0)
                info.candidate_tokens.add()
            else:
                _add_position(info, position, choice.choice.prompt_logprobs)
    return info


def sequence_output(delta: Any, state: GrpcOutputState, options: pb.ResponseOptions,
                    ) -> pb.SequenceOutput:
    """One delta of one sequence."""
    out = pb.SequenceOutput(index=delta.index, num_tokens=len(delta.token_ids))
    if not options.HasField("output_text") or options.output_text:
        out.text = delta.text
    if options.output_token_ids:
        out.token_ids.extend(delta.token_ids)
    if options.output_logprobs and delta.logprobs:
        k = state.prepared.logprobs
        for position in delta.logprobs:
            _add_position(out, position, k)
    if delta.finish_reason is not None:
        out.finish_info.CopyFrom(finish_info(delta, state))
    return out


def finish_info(delta: Any, state: GrpcOutputState) -> pb.FinishInfo:
    choice = state.choices[delta.index]
    info = pb.FinishInfo(num_output_tokens=choice.num_output_tokens,
                         finish_reason=_FINISH.get(delta.finish_reason, pb.FinishInfo.ABORTED),
                         num_cached_tokens=choice.num_cached_tokens)
    if delta.finish_reason == "stop":
        reason = delta.stop_reason
        if isinstance(reason, str):
            info.stop_string = reason
        elif isinstance(reason, int):
            info.stop_token_id = reason
        elif choice.token_ids:
            info.eos_token_id = choice.token_ids[-1]
    for name in ("kv_transfer_params", "ec_transfer_params"):
        value = getattr(state, name)
        if value:
            target = Struct()
            target.update(value)
            getattr(info, name).CopyFrom(target)
    return info


def aborted_deltas(state: GrpcOutputState) -> Iterator[ChoiceDelta]:
    """``Control.Abort`` ended the calls' sequences: an empty last delta for each one still
    running, finishing ABORTED (what vLLM's Rust frontend sends)."""
    for choice in state.choices:
        if choice.finished:
            continue
        choice.finish_reason = "abort"
        yield ChoiceDelta(choice.choice.index, "", [], None, "abort", None, False, False,
                          choice.num_output_tokens)


def _add_position(target: Any, position: Position, k: int | None) -> None:
    """The sampled (or actual) token's logprob and rank, then the top-k candidates in rank
    order, the sampled token among them when it is one of them (as vLLM lists them). A position
    keeps the sampled token once, with its top-k rank when it is in the top k, so the
    candidates are the entries ranked 1..k."""
    entries = list(position.items())
    _, (logprob, rank) = entries[0]
    target.logprobs.append(logprob)
    target.ranks.append(rank)
    candidates = target.candidate_tokens.add()
    if not k:
        return
    top = [(r, token_id, lp) for token_id, (lp, r) in entries[1:]]
    first_id, (first_lp, first_rank) = entries[0]
    if 1 <= first_rank and (k < 0 or first_rank <= k) and all(r != first_rank for r, _, _ in top):
        top.append((first_rank, first_id, first_lp))
    for r, token_id, lp in sorted(top):
        candidates.tokens.add(id=token_id, logprob=lp, rank=r)
