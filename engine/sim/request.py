"""One simulated request: token choice, stop rules and logprob arrays.

Owns ``SimRequest`` (built from a decoded ``EngineCoreRequest`` plus the
``sim_*`` knobs in ``extra_args``) and the deterministic logprob builders.
Called by ``engine.sim.scheduler`` once per request per step, so the per-token
path is kept to plain attribute reads and integer arithmetic.

Runs on: the simulator process.
"""

from __future__ import annotations

import array
import zlib
from typing import Any

from engine.protocol import EngineCoreRequest, LogprobsLists, LogprobsTensors, encode_ndarray
from engine.protocol.requests import GREEDY_EPSILON
from engine.sim.config import SimConfig

__all__ = ["FIRST_ORDINARY_TOKEN", "FULL_VOCAB_LOGPROBS_CAP", "SimRequest"]

#: Random tokens start here so they are ordinary (non-special) tokens.
FIRST_ORDINARY_TOKEN = 1000
#: logprobs = -1 means "whole vocabulary"; the simulator sends this many columns instead.
FULL_VOCAB_LOGPROBS_CAP = 20


_MODE_RANDOM, _MODE_ECHO, _MODE_LIST = 0, 1, 2
_MASK32 = 0xFFFFFFFF


def _mix32(x: int) -> int:
    # Integer hash (xorshift-multiply): cheap, deterministic, well spread.
    x = ((x ^ (x >> 16)) * 0x45D9F3B) & _MASK32
    x = ((x ^ (x >> 16)) * 0x45D9F3B) & _MASK32
    return x ^ (x >> 16)


def _knob(extra: dict, name: str, kind: type, warn: list[str]) -> Any:
    value = extra.get(name)
    if value is None:
        return None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or isinstance(value, bool):
        warn.append(f"ignoring extra_args.{name}={value!r} (expected {kind.__name__})")
        return None
    return value


def kv_transfer_answer(params: Any, request_id: str, prompt_len: int,
                       cfg: SimConfig) -> dict | None:
    """What a prefill node's KV connector puts in a finished request's ``kv_transfer_params``.

    A P/D proxy sends the prefill node ``{"do_remote_decode": true, ...}``; vLLM's NIXL
    connector answers, on the finishing output, where the decode node may read the prompt's KV
    blocks (``do_remote_prefill: true``, block ids, engine id, host, port, sizes). The
    simulator answers in that shape (its blocks: one per ``block_size`` prompt tokens), so
    that frontends can be checked to pass it on. Any other request: None, as without a
    connector.
    """
    if not isinstance(params, dict) or not params.get("do_remote_decode"):
        return None
    blocks = list(range(-(-prompt_len // cfg.block_size)))
    return {"do_remote_prefill": True, "do_remote_decode": False, "remote_block_ids": [blocks],
            "remote_engine_id": f"greenfront-sim-{cfg.rank}", "remote_request_id": request_id,
            "remote_host": "127.0.0.1", "remote_port": 5600 + cfg.rank, "tp_size": 1,
            "dcp_size": 1, "pp_size": 1, "remote_num_tokens": prompt_len,
            "remote_blocks_expiry_time": None, "transfer_mode": "READ"}


def _sampling_key(sim_seed: int, req: EngineCoreRequest) -> bytes:
    """What a request's random tokens derive from, as what a real engine's output depends on.

    Seeded: the seed (the request ids carry random suffixes, so seeded requests repeat across
    runs). Greedy (temperature below vLLM's epsilon) and unseeded: the prompt and the adapter,
    so the same prompt gives the same tokens every time, as argmax does. Otherwise the request
    id: every sampled request differs.
    """
    sp = req.sampling_params
    if sp.seed is not None:
        return f"{sim_seed}:seed:{sp.seed}".encode()
    if sp.temperature < GREEDY_EPSILON:
        lora = req.lora_request.lora_int_id if req.lora_request else ""
        prompt = array.array("q", req.prompt_token_ids or ()).tobytes()
        return f"{sim_seed}:greedy:{lora}:".encode() + prompt
    return f"{sim_seed}:{req.request_id}".encode()


class SimRequest:
    """Mutable per-request state; ``n_out`` tokens emitted so far."""

    __slots__ = (
        "request_id", "client_index", "prompt", "prompt_len", "max_tokens", "min_tokens",
        "eos", "stop_ids", "mode", "tokens", "base", "span", "vocab", "eos_after",
        "error_after", "error_code", "every", "start_step", "ready_at", "queued_at", "n_out", "done",
        "running", "logprobs_k", "prompt_logprobs_k", "limit", "warnings", "kv_answer",
        "pooling",
    )

    def __init__(self, req: EngineCoreRequest, cfg: SimConfig, now: float) -> None:
        sp = req.sampling_params
        assert sp is not None
        self.request_id = req.request_id
        self.client_index = req.client_index
        self.prompt = req.prompt_token_ids or []
        self.prompt_len = len(self.prompt)
        self.max_tokens = 16 if sp.max_tokens is None else sp.max_tokens
        self.min_tokens = sp.min_tokens
        self.eos = sp.eos_token_id
        self.stop_ids = frozenset(sp.stop_token_ids) if sp.stop_token_ids else None
        self.vocab = cfg.vocab_size
        self.n_out = 0
        self.pooling: list[float] | None = None  # a pooling request's output (engine.sim.pooling)
        self.done = False
        self.running = False
        self.start_step = 0
        self.queued_at = now
        self.warnings: list[str] = []
        extra = sp.extra_args if isinstance(sp.extra_args, dict) else {}
        warn = self.warnings

        self._choose_tokens(extra, cfg)
        self.base = zlib.crc32(_sampling_key(cfg.seed, req))
        if self.vocab > FIRST_ORDINARY_TOKEN + 1:
            self.span = self.vocab - FIRST_ORDINARY_TOKEN
        else:
            self.span = self.vocab

        eos_after = _knob(extra, "sim_eos_after", int, warn)
        self.eos_after = cfg.eos_after if eos_after is None else eos_after
        self.error_after = _knob(extra, "sim_error_after", int, warn)
        self.error_code = _knob(extra, "sim_error_code", str, warn)
        itl = _knob(extra, "sim_itl_ms", float, warn)
        self.every = max(1, round(itl / cfg.itl_ms)) if itl is not None and itl > 0 else 1
        self.kv_answer = kv_transfer_answer(extra.get("kv_transfer_params"), req.request_id,
                                            self.prompt_len, cfg)
        ttft = _knob(extra, "sim_ttft_ms", float, warn)
        ttft_ms = cfg.ttft_ms if ttft is None else max(0.0, ttft)
        self.ready_at = now + ttft_ms / 1000.0 + self.prompt_len * cfg.prefill_us_per_token / 1e6
        # Tokens allowed before max_model_len caps the request.
        self.limit = min(self.max_tokens, max(1, cfg.max_model_len - self.prompt_len))

        k = sp.logprobs
        self.logprobs_k = None if k is None else (FULL_VOCAB_LOGPROBS_CAP if k < 0 else k)
        k = sp.prompt_logprobs
        self.prompt_logprobs_k = None if k is None else (FULL_VOCAB_LOGPROBS_CAP if k < 0 else k)

    def _choose_tokens(self, extra: dict, cfg: SimConfig) -> None:
        """Where this request's tokens come from (``mode``, ``tokens``): the ``sim_tokens`` list,
        else ``--script-tokens``, else the echo of its prompt, or random ids."""
        warn = self.warnings
        mode = _knob(extra, "sim_output_mode", str, warn) or cfg.output_mode
        if mode not in ("echo", "random"):
            warn.append(f"ignoring extra_args.sim_output_mode={mode!r}")
            mode = cfg.output_mode
        tokens = extra.get("sim_tokens")
        if tokens is not None and not (
            isinstance(tokens, list)
            and tokens
            and all(isinstance(t, int) and not isinstance(t, bool) and 0 <= t < 2**31 for t in tokens)
        ):
            warn.append("ignoring extra_args.sim_tokens (expected a non-empty list of int32 token ids)")
            tokens = None
        if tokens is None and cfg.script_tokens:
            tokens = cfg.script_tokens
        self.tokens = tokens
        if tokens is not None:
            self.mode = _MODE_LIST
        elif mode == "echo" and self.prompt:
            self.mode = _MODE_ECHO
            # The first prompt token is usually BOS: echo the rest.
            self.tokens = self.prompt[1:] if self.prompt_len > 1 else list(self.prompt)
        else:
            self.mode = _MODE_RANDOM

    # ------------------------------------------------------------ tokens

    def _random_token(self, i: int) -> int:
        return FIRST_ORDINARY_TOKEN + _mix32((self.base + i * 0x9E3779B9) & _MASK32) % self.span

    def next_token(self) -> int:
        """The token at position ``n_out`` (0-based), honouring eos_after and min_tokens."""
        i = self.n_out
        mode = self.mode
        if mode == _MODE_RANDOM:
            tok = FIRST_ORDINARY_TOKEN + _mix32((self.base + i * 0x9E3779B9) & _MASK32) % self.span
        elif mode == _MODE_ECHO:
            tokens = self.tokens
            tok = tokens[i % len(tokens)]
        else:
            tokens = self.tokens
            if i < len(tokens):
                tok = tokens[i]
            elif self.eos is not None:
                tok = self.eos
            else:
                tok = tokens[i % len(tokens)]
        eos = self.eos
        if eos is not None and self.eos_after and i + 1 == self.eos_after:
            tok = eos
        if i < self.min_tokens and (tok == eos or (self.stop_ids is not None and tok in self.stop_ids)):
            # vLLM masks EOS/stop tokens until min_tokens have been generated.
            tok = self._unmasked_token(i)
        return tok

    def _unmasked_token(self, i: int) -> int:
        stop = self.stop_ids or ()
        for attempt in range(64):
            tok = self._random_token(i + 7919 * (attempt + 1))
            if tok != self.eos and tok not in stop:
                return tok
        return tok  # a vocabulary made only of stop tokens: give up

    # ---------------------------------------------------------- logprobs

    def _alternatives(self, tok: int, count: int) -> list[int]:
        vocab = self.vocab
        return [(tok + j) % vocab for j in range(1, count + 1)]

    def sample_logprobs(self, tok: int, aux: list[bytes]) -> LogprobsLists:
        """``new_logprobs`` for one sampled token: [1, k+1] ids/logprobs, [1] ranks.

        Column 0 is the sampled token; it is also the top-1 (rank 1), so column
        1 repeats it; further columns are other ids with lower logprobs.
        """
        k = self.logprobs_k
        top = -0.25 - 0.125 * (self.n_out % 4)
        ids = [tok]
        lps = [top]
        if k:
            ids.append(tok)
            ids.extend(self._alternatives(tok, k - 1))
            lps.extend(top - 0.5 * j for j in range(k))
        cols = len(ids)
        return LogprobsLists(
            encode_ndarray(ids, "<i4", [1, cols], aux),
            encode_ndarray(lps, "<f4", [1, cols], aux),
            encode_ndarray([1], "<i8", [1], aux),
            None,
        )

    def prompt_logprobs(self, aux: list[bytes]) -> LogprobsTensors:
        """``new_prompt_logprobs_tensors``: [prompt_len-1, k+1] (the first token has none)."""
        k = self.prompt_logprobs_k or 0
        rows = max(0, self.prompt_len - 1)
        ids: list[int] = []
        lps: list[float] = []
        for r in range(rows):
            tok = self.prompt[r + 1]
            top = -0.5 - 0.25 * (r % 5)
            ids.append(tok)
            lps.append(top)
            if k:
                ids.append(tok)
                ids.extend(self._alternatives(tok, k - 1))
                lps.extend(top - 0.5 * j for j in range(k))
        cols = k + 1
        return LogprobsTensors(
            encode_ndarray(ids, "int32", [rows, cols], aux),
            encode_ndarray(lps, "float32", [rows, cols], aux),
            encode_ndarray([1] * rows, "int32", [rows], aux),
            None,
            None,
        )
