"""Tool-calling parity harness: vLLM 0.32's own Python frontend and greenfront, started with the
same parser flags on greenfront's simulator with the marker-token model, given the same scripted
model outputs; their answers folded per field (ids excepted) so they can be compared.

One ``ParityPair`` per parser configuration (vLLM's frontend is slow to start: a module-scoped
fixture starts each once).

Runs on: the test process.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

import requests

from engine.sim.script import scripted
from tests.support.processes import free_port
from tests.integration.harness import ROOT, GreenfrontServer
from tests.interop.peers import VllmProcess

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "Local time",
        "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}}}},
]
SERVE = ["--served-model-name", "tiny", "--max-model-len", "2048"]


def flags_to_env(flags: list[str]) -> dict[str, str]:
    """vLLM's parser flags as greenfront settings (as the launcher maps them)."""
    env, i = {}, 0
    names = {"--tool-call-parser": "GREENFRONT_TOOL_CALL_PARSER",
             "--reasoning-parser": "GREENFRONT_REASONING_PARSER",
             "--tool-parser-plugin": "GREENFRONT_TOOL_PARSER_PLUGIN"}
    while i < len(flags):
        if flags[i] == "--enable-auto-tool-choice":
            env["GREENFRONT_ENABLE_AUTO_TOOL_CHOICE"] = "1"
            i += 1
        else:
            env[names[flags[i]]] = flags[i + 1]
            i += 2
    return env


class ParityPair:
    """vLLM's frontend + a simulator, and greenfront + its simulator, same flags and model."""

    def __init__(self, model_dir: str, flags: list[str], logs: str, itl_ms: int = 1,
                 vllm_env: dict[str, str] | None = None,
                 greenfront_env: dict[str, str] | None = None) -> None:
        self.model_dir = model_dir
        port, rpc = free_port(), free_port()
        self.vllm = VllmProcess(["--port", str(port), "--host", "127.0.0.1", *SERVE,
                                 "--enforce-eager", "--disable-uvicorn-access-log",
                                 "--disable-log-stats", "--data-parallel-size", "1",
                                 "--data-parallel-size-local", "0",
                                 "--data-parallel-address", "127.0.0.1",
                                 "--data-parallel-rpc-port", str(rpc), *flags],
                                os.path.join(logs, "vllm.log"), port=port, model=model_dir,
                                env=vllm_env)
        self.sim = subprocess.Popen(
            [sys.executable, "-m", "engine.sim", "--handshake", f"tcp://127.0.0.1:{rpc}",
             "--max-model-len", "2048", "--vocab-size", "131072", "--itl-ms", str(itl_ms)],
            cwd=ROOT, stdout=open(os.path.join(logs, "sim.log"), "wb"),
            stderr=subprocess.STDOUT, start_new_session=True)
        self.greenfront = GreenfrontServer(model_dir, env={**flags_to_env(flags),
                                                           "GREENFRONT_SYSTEM_FINGERPRINT": "",
                                                           **(greenfront_env or {})},
                                           sim_args=f"--itl-ms {itl_ms} --ttft-ms 2")

    def start(self) -> "ParityPair":
        try:
            self.greenfront.start(timeout=120)
            self.vllm.wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        self.greenfront.stop()
        self.vllm.kill()
        try:
            os.killpg(self.sim.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.sim.wait()

    def both(self, tok: Any, text: str, **body: Any) -> tuple[dict, dict]:
        """The folded answers (vLLM's, greenfront's) to one scripted request."""
        request = {"model": "tiny", "messages": [{"role": "user", "content": "Weather?"}],
                   "tools": TOOLS, "max_tokens": 300, "temperature": 0,
                   "vllm_xargs": scripted(tok, text), **body}
        return fold(self.vllm.url, request), fold(self.greenfront.url, request)


def fold(url: str, body: dict) -> dict:
    """One answer folded per field; streamed answers accumulated per choice."""
    if not body.get("stream"):
        r = requests.post(url + "/v1/chat/completions", json=body, timeout=120)
        out = r.json()
        if r.status_code != 200:
            return {"status": r.status_code, "error": out.get("error", {}).get("message")}
        return {"usage": out["usage"], "choices": [_folded_message(c) for c in out["choices"]]}
    choices: dict[int, dict] = {}
    usage = None
    with requests.post(url + "/v1/chat/completions", json=body, timeout=120, stream=True) as r:
        if r.status_code != 200:
            return {"status": r.status_code, "error": r.json().get("error", {}).get("message")}
        for line in r.iter_lines(decode_unicode=True):
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            usage = chunk.get("usage") or usage
            for c in chunk.get("choices", []):
                _fold_delta(choices.setdefault(c["index"], {
                    "content": "", "reasoning": "", "calls": {}, "finish_reason": None}), c)
    return {"usage": usage, "choices": [_finish(choices[i]) for i in sorted(choices)]}


def _folded_message(choice: dict) -> dict:
    m = choice["message"]
    calls = m.get("tool_calls")
    for call in calls or []:
        assert call["id"] and call["type"] == "function"
    return {"content": m.get("content"), "reasoning": m.get("reasoning"),
            "calls": None if calls is None else [
                (c["function"]["name"], c["function"]["arguments"]) for c in calls],
            "finish_reason": choice["finish_reason"]}


def _fold_delta(acc: dict, choice: dict) -> None:
    delta = choice.get("delta") or {}
    acc["content"] += delta.get("content") or ""
    acc["reasoning"] += delta.get("reasoning") or ""
    for call in delta.get("tool_calls") or []:
        entry = acc["calls"].setdefault(call["index"], {"ids": 0, "name": "", "arguments": ""})
        entry["ids"] += 1 if call.get("id") else 0
        function = call.get("function") or {}
        entry["name"] += function.get("name") or ""
        entry["arguments"] += function.get("arguments") or ""
    acc["finish_reason"] = choice.get("finish_reason") or acc["finish_reason"]


def _finish(acc: dict) -> dict:
    acc["calls"] = [(c["ids"], c["name"], c["arguments"])
                    for _, c in sorted(acc["calls"].items())]
    return acc
