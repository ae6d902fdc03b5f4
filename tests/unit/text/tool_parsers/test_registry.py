"""The parser registries and the plugin loader (vLLM's --tool-parser-plugin)."""
from __future__ import annotations

import pytest

from text.output_parsers import ParserSetupError, load_output_parsers
from text.reasoning import get_reasoning_parser
from text.tool_parsers import get_tool_parser, names

PLUGIN = '''
from text.parsed import ExtractedToolCalls, ToolCall
from text.tool_parsers import ToolParser, register_tool_parser

@register_tool_parser("shout")
class Shout(ToolParser):
    required_tokens = ("<tool_call>",)

    def extract(self, text):
        return ExtractedToolCalls([ToolCall(text.upper(), "{}")], None)
'''


def test_builtin_families_are_found_by_vllm_names():
    for name in ("hermes",):
        assert get_tool_parser(name).name == name
    assert get_reasoning_parser("qwen3").name == "qwen3"
    assert "hermes" in names()
    with pytest.raises(KeyError, match="known parsers"):
        get_tool_parser("nope")


def test_a_plugin_file_registers_its_parser(tmp_path, vocab):
    path = tmp_path / "my_plugin.py"
    path.write_text(PLUGIN)
    parsers = load_output_parsers(enable_auto_tool_choice=True, tool_call_parser="shout",
                                  tool_parser_plugin=str(path), reasoning_parser="",
                                  vocab=vocab)
    assert parsers.tool_parser(vocab, None).extract("hi").calls[0].name == "HI"


@pytest.mark.parametrize("kwargs, message", [
    ({"enable_auto_tool_choice": True, "tool_call_parser": ""}, "requires --tool-call-parser"),
    ({"enable_auto_tool_choice": True, "tool_call_parser": "nope"}, "not known"),
    ({"reasoning_parser": "nope"}, "not known"),
    ({"tool_parser_plugin": "/no/such/file.py"}, "does not exist"),
])
def test_bad_configurations_fail_the_start(kwargs, message, vocab):
    args = {"enable_auto_tool_choice": False, "tool_call_parser": "", "tool_parser_plugin": "",
            "reasoning_parser": "", **kwargs}
    with pytest.raises(ParserSetupError, match=message):
        load_output_parsers(vocab=vocab, **args)


def test_a_tokenizer_without_the_markers_fails_the_start():
    with pytest.raises(ParserSetupError, match="<think>"):
        load_output_parsers(enable_auto_tool_choice=False, tool_call_parser="",
                            tool_parser_plugin="", reasoning_parser="deepseek_r1",
                            vocab={"a": 1})


def test_a_parser_name_without_auto_tool_choice_enables_no_tool_parser(vocab):
    parsers = load_output_parsers(enable_auto_tool_choice=False, tool_call_parser="hermes",
                                  tool_parser_plugin="", reasoning_parser="", vocab=vocab)
    assert parsers.tool_parser is None and not parsers.active


def test_every_vllm_family_named_by_the_issue_is_served_by_its_name():
    tools = ["hermes", "llama3_json", "llama4_json", "mistral", "pythonic", "llama4_pythonic",
             "qwen3_xml", "qwen3_coder", "deepseek_v3", "deepseek_v31", "kimi_k2", "glm45",
             "glm47", "minimax_m2", "granite"]
    assert [get_tool_parser(n).name for n in tools] == tools
    thoughts = ["deepseek_r1", "qwen3", "glm45", "kimi_k2", "minimax_m2", "mistral", "granite"]
    assert [get_reasoning_parser(n).name for n in thoughts] == thoughts


def test_harmony_names_are_refused_saying_why(vocab):
    with pytest.raises(KeyError, match="not built in greenfront: the harmony format"):
        get_tool_parser("openai")
    with pytest.raises(ParserSetupError, match="tiktoken vocabulary"):
        load_output_parsers(enable_auto_tool_choice=False, tool_call_parser="",
                            tool_parser_plugin="", reasoning_parser="openai_gptoss",
                            vocab=vocab)
