"""deepseek_v3 / deepseek_v31: calls between DeepSeek's marker tokens, whole and streamed."""
from __future__ import annotations

from tests.unit.text.tool_parsers.conftest import stream
from text.tool_parsers import get_tool_parser

BEGIN, END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"


def v3(*calls: tuple[str, str]) -> str:
    return BEGIN + "".join(f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{n}\n```json\n{a}\n```"
                           "<｜tool▁call▁end｜>" for n, a in calls) + END


def v31(*calls: tuple[str, str]) -> str:
    return BEGIN + "".join(f"<｜tool▁call▁begin｜>{n}<｜tool▁sep｜>{a}<｜tool▁call▁end｜>"
                           for n, a in calls) + END


def make(vocab, name="deepseek_v3"):
    return get_tool_parser(name)(vocab, None)


def test_whole_calls_and_the_content_before(vocab):
    out = make(vocab).extract("Hi " + v3(("f", '{"a": 1}'), ("g", "{}")))
    assert [(c.name, c.arguments) for c in out.calls] == [("f", '{"a": 1}'), ("g", "{}")]
    assert out.content == "Hi "
    out = make(vocab, "deepseek_v31").extract(v31(("f", '{"a": 1}')))
    assert [(c.name, c.arguments) for c in out.calls] == [("f", '{"a": 1}')]


def test_a_section_with_no_readable_call_still_counts_as_called(vocab):
    out = make(vocab).extract("x" + v3(("f", '{\n"a": 1\n}')))  # arguments over lines
    assert out.called and out.calls == [] and out.content == "x"
    assert make(vocab).extract("plain").content == "plain"


def test_stream_one_token_per_delta(vocab, marker_tok):
    got = stream(make(vocab), marker_tok, "Hi " + v3(("f", '{"a": "b"}'), ("g", '{"c": 2}')))
    assert got["content"] == "Hi "
    assert [(c["name"], c["arguments"]) for _, c in sorted(got["calls"].items())] == [
        ("f", '{"a": "b"}'), ("g", '{"c": 2}')]
    got = stream(make(vocab, "deepseek_v31"), marker_tok, v31(("f", '{"a": "b"}')))
    assert (got["calls"][0]["name"], got["calls"][0]["arguments"]) == ("f", '{"a": "b"}')
