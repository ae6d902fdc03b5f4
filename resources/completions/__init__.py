"""/v1/completions: request conversion (``convert.prepare_completion``) and rendering
(``render.CompletionStreamRenderer``, ``render.render_completion_response``).

Runs on: request pool threads (convert) and the HTTP hub (render).
"""
from resources.completions.convert import prepare_completion

__all__ = ["prepare_completion"]
