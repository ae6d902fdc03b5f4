"""Engine-core simulator: a fake vLLM v1 engine core speaking the real wire protocol.

Owns ``python -m engine.sim``: greenfront's embedded default engine and the
engine of the test suite. It connects like a real headless engine (docs/engine-protocol.md §8.2),
so vLLM's own Python frontend, vllm-rs and greenfront can all drive it. No
model: tokens come from the prompt (echo) or a seeded hash (random).

Runs on: the simulator process (single thread, plain pyzmq, a ``zmq.Poller``
loop with a step timer).

Modules: ``config`` (CLI), ``scheduler`` (requests, steps, token choice,
logprobs, stats), ``request`` (one request's tokens, stop rules, logprobs),
``utility`` (UTILITY methods), ``registration`` (what the engine reports when it
registers), ``engine`` (sockets, handshake, main loop, faults).

Connecting (choose one):
  --handshake ADDR        DEALER (identity = rank, 2-byte LE) to the frontend's
                          handshake ROUTER: HELLO {local:false, headless:true},
                          read INIT, connect to INIT's inputs/outputs, send the
                          registration on every input, then READY.
  --input ADDR --output ADDR (both repeatable)
                          connect directly and send the registration (a test
                          playing ``vllm serve``).
  --rank N                DP rank: identity, registration, engine_index (0).

Registration: --max-model-len 4096, --num-gpu-blocks 16384, --block-size 16,
--max-num-seqs 1024 (more requests wait), --max-num-batched-tokens 8192,
--data-parallel-size 1, --vllm-version 0.32.0 (0.32.x sends 18-element
EngineCoreOutput arrays, later versions 19 and accept ``pause_generation``),
--dtype bfloat16, --enable-lora (supports_lora=true, --max-loras 4),
--enable-sleep-mode, --kv-events-endpoint ADDR (a kv_events_config naming a ZMQ publisher there).

Timing: --ttft-ms 20 (first-token delay after arrival), --prefill-us-per-token 0
(extra first-token delay per prompt token), --itl-ms 10 (step interval; every
running request gets one token per step; all outputs of a step for one client
go in one EngineCoreOutputs message).

Tokens: --output-mode echo|random (random). echo cycles through the prompt,
skipping its first token when the prompt is longer than one (usually BOS).
random draws ids in [1000, --vocab-size 131072) from a hash of --seed (0) and
the request's own ``seed`` when it has one (seeded requests repeat across
runs), else for greedy requests (temperature 0) the prompt and the adapter (the
same prompt gives the same tokens every time, as a real engine's argmax does),
else the request id; set --vocab-size to the served tokenizer's size so random
ids decode. --eos-after N (0 = never) makes the N-th token
the request's ``_eos_token_id`` when it has one.

Finishing: STOP on ``_eos_token_id`` (stop_reason nil) or a ``stop_token_ids``
id (stop_reason = the id), never before ``min_tokens`` tokens (such tokens are
replaced, as vLLM's min-tokens logits processor masks them); else LENGTH at
``max_tokens`` (16 when absent) or when prompt + output reaches max_model_len.
Stop tokens win over LENGTH on the same token. ``ignore_eos`` needs no special
case: the frontend then omits ``_eos_token_id``.

Per-request knobs in ``sampling_params.extra_args`` (greenfront passes the
user's ``vllm_xargs`` through):
  sim_output_mode  "echo" | "random"
  sim_eos_after    int: N-th token is EOS (needs ``_eos_token_id``)
  sim_ttft_ms      float: this request's first-token delay
  sim_itl_ms       float: approximate; a token every round(sim_itl_ms/itl_ms) steps
  sim_tokens       list[int]: emit exactly these, then EOS if the request has
                   ``_eos_token_id``, else cycle through them again (``--script-tokens``
                   gives every request without ``sim_tokens`` such a list)
  sim_error_after  int: after N tokens finish with ERROR (finish_reason 3, no
                   tokens; 0.33+ also sets ``error``: code ``sim_error_code``, default
                   "sim_error"; retryable when that is "engine_paused")
A request whose ``extra_args.kv_transfer_params`` has ``do_remote_decode`` (a P/D prefill
request) finishes with a KV connector's answer in ``kv_transfer_params``
(``request.kv_transfer_answer``, the NIXL connector's shape).

Logprobs: ``logprobs`` k >= 0 attaches ``new_logprobs`` (``<i4``/``<f4`` [1, k+1],
``<i8`` [1]); ``prompt_logprobs`` attaches ``new_prompt_logprobs_tensors``
(``int32``/``float32`` [prompt_len-1, k+1], ``int32`` ranks) on the first output.
Column 0 is the sampled/actual token; it is also the top-1 (rank 1); values are
deterministic, negative and descending. -1 (full vocabulary) is capped at 20
columns. Arrays of 256 bytes or more travel as aux frames, like vLLM.

Stats (default on, like vLLM): the complete ``scheduler_stats`` map on each
step's first message, request events (QUEUED, SCHEDULED) on first outputs, and
a stats-only message when the engine goes idle after a finish or abort.
--disable-log-stats turns all of that off. ``prefill_stats`` is always on first
outputs; ``weight_version`` is "default" on step messages.

LoRA: ``add_lora`` (any path) and ``remove_lora`` keep a set of adapter ids. An ADD's
``lora_request`` naming one of them is served like any request (--verbose logs
``lora=<name>:<id>``); one never added is loaded on demand and served, as a real
engine's LoRA manager does (logged); without --enable-lora it is ignored (logged).

Requests: ABORT drops ids silently. Invalid SamplingParams (the checks of
``engine.protocol.validate``, minus the vocabulary ones, which are the
frontend's job) or undecodable requests are logged and ignored;
--strict-input-thread instead stops reading input for good, as a real engine's
input thread dies. UTILITY methods: see ``engine.sim.utility``.

Pooling: --runner pooling (--convert embed, the default, or classify) plays a pooling model's
engine: ``get_supported_tasks`` answers vLLM 0.32's lists for it, and an ADD with
``sampling_params`` (a generation request) kills it as it kills a real engine core.

Faults: --die-after N (after the N-th request's first token: push
ENGINE_CORE_DEAD on every output, exit 1 after the linger); --stall-after N
(serve N ADDs; when ADD N+1 arrives go silent for good, sockets stay open).
SIGTERM/SIGINT: exit 0 at once, sending nothing. --verbose logs per request.
"""
