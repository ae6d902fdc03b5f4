"""Anthropic's Messages API (``/v1/messages``, ``/v1/messages/count_tokens``) as a conversion to
and from the chat pipeline (docs/messages.md)."""
