"""The Responses API store's settings (``docs/responses.md`` §3), a mixin of ``base.config.Config``.

Runs on: import time (declarations only).
"""
from __future__ import annotations

from dataclasses import dataclass

from base.settings import boolean, positive_float, positive_int, setting

THIRTY_DAYS = 30 * 24 * 3600.0


@dataclass(frozen=True)
class ResponsesSettings:
    """Where /v1/responses keeps stored responses, and for how long."""

    enable_responses_store: bool = setting(
        ("GREENFRONT_ENABLE_RESPONSES_STORE", "VLLM_ENABLE_RESPONSES_API_STORE"), boolean, False,
        "keep /v1/responses answers (`store`) for `previous_response_id` and "
        "`GET /v1/responses/{id}`, in a store every worker shares (docs/responses.md §3)")
    responses_store_url: str = setting(
        ("GREENFRONT_RESPONSES_STORE_URL",), str, "",
        "the responses store: `redis://…` (shared by deployments on several hosts) or "
        "`sqlite:///path`", shown="SQLite in the run dir", secret=True)
    responses_store_max_entries: int = setting(
        ("GREENFRONT_RESPONSES_STORE_MAX_ENTRIES",), positive_int, 10000,
        "stored responses kept; the oldest are evicted beyond it")
    responses_store_max_age: float = setting(
        ("GREENFRONT_RESPONSES_STORE_MAX_AGE",), positive_float, THIRTY_DAYS,
        "seconds a stored response is kept", shown="2592000 (30 days)")
