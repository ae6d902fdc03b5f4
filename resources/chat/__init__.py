"""/v1/chat/completions: request conversion (``convert.prepare_chat``) and rendering
(``render.ChatStreamRenderer``, ``render.render_chat_response``).

Runs on: request pool threads (convert) and the HTTP hub (render).
"""
from resources.chat.convert import prepare_chat

__all__ = ["prepare_chat"]
