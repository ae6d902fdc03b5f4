"""Reading a deployment's ``/metrics`` from the outside."""
from __future__ import annotations

import re

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
