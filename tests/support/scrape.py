"""Reading a deployment from the outside: ``/metrics`` series, and streams left unread."""
from __future__ import annotations

import json
import re
import socket

import requests

_LORA_INFO = re.compile(r'^vllm:lora_requests_info\{(.*)\} (\S+)$', re.M)


def lora_info(url: str) -> dict[tuple[str, str, str], float]:
    """Each vllm:lora_requests_info series: (max_lora, waiting, running) -> its time."""
    found = {}
    for labels, value in _LORA_INFO.findall(requests.get(url + "/metrics", timeout=10).text):
        pairs = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        found[(pairs["max_lora"], pairs["waiting_lora_adapters"],
               pairs["running_lora_adapters"])] = float(value)
    return found


def current_lora_info(url: str) -> tuple[str, str, str] | None:
    """The latest-stamped vllm:lora_requests_info series: the adapters in flight now."""
    series = lora_info(url)
    return max(series, key=series.get) if series else None


def open_stream(url: str, model: str, max_tokens: int) -> socket.socket:
    """A streamed completion naming ``model`` (ignore_eos), left unread after its first chunk;
    closing the socket is the client's disconnect."""
    payload = json.dumps({"model": model, "prompt": "hello", "max_tokens": max_tokens,
                          "ignore_eos": True, "stream": True}).encode()
    host, port = url.rsplit("//", 1)[1].split(":")
    sock = socket.create_connection((host, int(port)), timeout=60)
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(payload) + payload)
    received = b""
    while b"data: " not in received:
        received += sock.recv(65536)
    return sock
