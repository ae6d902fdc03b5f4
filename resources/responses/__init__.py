"""/v1/responses: OpenAI's Responses API as conversions to and from the chat pipeline
(``docs/responses.md``)."""
