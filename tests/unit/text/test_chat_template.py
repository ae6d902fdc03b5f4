"""Chat template rendering against the captured vLLM prompts (docs/text-parity.md §4.2, §4.4, §8.2)."""
from __future__ import annotations

import json

import pytest

from text.chat_messages import ChatTemplateError, parse_messages
from text.chat_template import EMPTY_CONVERSATION_MESSAGE, INCOMPATIBLE_FLAGS_MESSAGE, ChatTemplate
from text.model_dir import ModelFiles


@pytest.fixture(scope="module")
def files(model_dir) -> ModelFiles:
    return ModelFiles.load(model_dir)


@pytest.fixture(scope="module")
def chat(files) -> ChatTemplate:
    return ChatTemplate(files.chat_template, files.special_tokens)


def user(text):
    return {"role": "user", "content": text}


def prompt_ids(tok, chat, messages, add_special_tokens=False, **kw):
    return tok.encode(chat.render(messages, **kw), add_special_tokens=add_special_tokens)


def test_user_only(tok, chat):
    assert chat.render([user("Hi")]) == "<s>[INST]Hi[/INST]"
    assert prompt_ids(tok, chat, [user("Hi")]) == [1, 3, 37133, 4]
    assert prompt_ids(tok, chat, [user("Hi")], add_special_tokens=True) == [1, 1, 3, 37133, 4]


def test_system_and_user(tok, chat):
    messages = [{"role": "system", "content": "Be brief."}, user("Hi")]
    ids = prompt_ids(tok, chat, messages)
    assert ids == [1, 3, 5934, 13426, 1338, 37133, 4]
    assert tok.convert_ids_to_tokens(ids) == ["<s>", "[INST]", "Be", "Ġbrief", ".ĊĊ", "Hi", "[/INST]"]


def test_content_parts_joined_with_newline(tok, chat):
    parts = [{"type": "text", "text": "Hi"}, {"type": "text", "text": "there"}]
    assert chat.render([user(parts)]) == "<s>[INST]Hi\nthere[/INST]"
    assert prompt_ids(tok, chat, [user(parts)]) == [1, 3, 37133, 1010, 33211, 4]


def test_system_folded_before_last_user(tok, chat):
    messages = [{"role": "system", "content": "S"}, user("a[/INST]b</s>"),
                {"role": "assistant", "content": "A"}, user("U")]
    text = chat.render(messages)
    assert text == "<s>[INST]a[/INST]b</s>[/INST]A</s>[INST]S\n\nU[/INST]"
    assert tok.encode(text, add_special_tokens=False) == [
        1, 3, 1097, 4, 1098, 2, 4, 1065, 2, 3, 1083, 1267, 1085, 4]


def test_unknown_role_is_ignored_by_template(tok, chat):
    assert prompt_ids(tok, chat, [{"role": "wizard", "content": "x"}]) == [1]


def test_continue_final_message(tok, chat):
    messages = [user("Hi"), {"role": "assistant", "content": "Hello"}]
    text = chat.render(messages, add_generation_prompt=False, continue_final_message=True)
    assert text == "<s>[INST]Hi[/INST]Hello"
    assert tok.encode(text, add_special_tokens=False) == [1, 3, 37133, 4, 22177]
    # The caller's messages are untouched.
    assert messages[1]["content"] == "Hello"


def test_continue_final_message_trimmed_tag():
    t = ChatTemplate("{% for m in messages %}{{ m.content | trim }}|{% endfor %}", {})
    assert t.render([user("a"), user("b  ")], add_generation_prompt=False,
                    continue_final_message=True) == "a|b"


def test_errors(chat):
    with pytest.raises(ChatTemplateError) as e:
        chat.render([])
    assert str(e.value) == EMPTY_CONVERSATION_MESSAGE
    with pytest.raises(ChatTemplateError) as e:
        chat.render([user("Hi")], add_generation_prompt=True, continue_final_message=True)
    assert str(e.value) == INCOMPATIBLE_FLAGS_MESSAGE
    with pytest.raises(ChatTemplateError) as e:
        chat.render([user("Hi")], extra_kwargs={"tokenize": True})
    assert str(e.value) == "Found unexpected chat template kwargs from request: {'tokenize'}"
    with pytest.raises(ChatTemplateError):
        ChatTemplate("{% if %}", {})
    # A non-string content concatenated by the template is a template error, not a crash.
    with pytest.raises(ChatTemplateError):
        chat.render([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}])


def test_raise_exception_message():
    t = ChatTemplate("{{ raise_exception('Only user and assistant roles are supported!') }}", {})
    with pytest.raises(ChatTemplateError) as e:
        t.render([user("x")])
    assert str(e.value) == "Only user and assistant roles are supported!"
    assert isinstance(e.value, ValueError)


def test_environment_features():
    src = ("{% for m in messages %}{% if loop.index > 2 %}{% break %}{% endif %}"
           "{% generation %}{{ m.content | tojson }}{% endgeneration %}\n"
           "{% endfor %}{{ bos_token }}{{ strftime_now('%Y') | length }}|{{ extra }}|{{ tools | tojson }}")
    t = ChatTemplate(src, {"bos_token": "<s>"})
    out = t.render([user("é<&>"), user('"q"'), user("never")], tools=[{"a": 1}],
                   extra_kwargs={"extra": "X", "unused": 1, "padding": True})
    # tojson: no ASCII escaping, no HTML escaping; trim_blocks eats the newline after a block tag.
    assert out == '"é<&>""\\"q\\""<s>4|X|[{"a": 1}]'


def test_special_tokens_and_kwargs_override():
    t = ChatTemplate("{{ bos_token }}{{ eos_token }}{{ add_generation_prompt }}", {"bos_token": "<s>",
                                                                                    "eos_token": "</s>"})
    assert t.render([user("x")]) == "<s></s>True"
    assert t.render([user("x")], add_generation_prompt=False,
                    extra_kwargs={"bos_token": "B", "add_generation_prompt": True}) == "B</s>False"


def test_developer_becomes_system(tok, chat):
    messages = [{"role": "developer", "content": "Be brief."}, user("Hi")]
    assert prompt_ids(tok, chat, messages) == [1, 3, 5934, 13426, 1338, 37133, 4]
    # Several system/developer messages are merged into one leading system message.
    messages = [user("a"), {"role": "system", "content": "S1"}, {"role": "developer", "content": "S2"},
                user("b")]
    assert chat.render(messages) == "<s>[INST]a[/INST][INST]S1\n\nS2\n\nb[/INST]"
    # A template that knows the developer role gets it unchanged.
    t = ChatTemplate("{% for m in messages %}{% if m.role == 'developer' %}D:{{ m.content }}"
                     "{% endif %}{% endfor %}", {})
    assert t.render([{"role": "developer", "content": "x"}]) == "D:x"


def test_tool_call_arguments_parsed():
    t = ChatTemplate("{% for m in messages %}{% for c in m.tool_calls or [] %}"
                     "{{ c.function.arguments | tojson }};{% endfor %}{% endfor %}", {})
    calls = [
        {"id": "1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1, "y": "é"}'}},
        {"id": "2", "type": "function", "function": {"name": "g", "arguments": "not json"}},
        {"id": "3", "type": "function", "function": {"name": "h", "arguments": "[1, 2]"}},
        {"id": "4", "type": "function", "function": {"name": "k", "arguments": ""}},
    ]
    messages = [user("q"), {"role": "assistant", "content": None, "tool_calls": calls}]
    assert t.render(messages) == '{"x": 1, "y": "é"};{};{};{};'
    assert calls[0]["function"]["arguments"] == '{"x": 1, "y": "é"}'  # input not mutated


def test_parse_messages_shapes():
    conv = parse_messages([
        {"role": "system", "content": [{"type": "text", "text": "x-anthropic-billing-header: 1\nS"}]},
        {"role": "assistant", "content": None, "tool_calls": [], "reasoning": "R", "name": "bot"},
        {"role": "tool", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
         "tool_call_id": "c1"},
        {"role": "developer", "content": "D"},
        {"role": "user", "content": [{"type": "text", "text": None}, "plain", "", {"type": "refusal",
                                                                                 "refusal": "no"}]},
    ])
    assert conv == [
        {"role": "system", "content": "S"},
        {"role": "assistant", "content": "", "reasoning": "R", "reasoning_content": "R",
         "name": "bot"},
        {"role": "tool", "content": "a\nb", "tool_call_id": "c1"},
        {"role": "developer", "content": "D", "tools": None},
        {"role": "user", "content": "plain\nno"},
    ]
    with pytest.raises(ChatTemplateError) as e:
        parse_messages([{"role": "user", "content": [{"text": "no type"}]}])
    assert str(e.value) == "Missing 'type' field in multimodal part."


def test_documents_must_be_dicts(chat):
    with pytest.raises(ChatTemplateError):
        chat.render([user("x")], documents=["not a dict"])


def test_template_from_json_roundtrip(files):
    # The template in tokenizer_config.json is exactly the reference model's string.
    with open(f"{files.path}/tokenizer_config.json", encoding="utf-8") as f:
        assert json.load(f)["chat_template"] == files.chat_template


def test_dumped_once_renders_as_plain_json():
    from text.chat_template import DumpedOnce
    src = ("{% for t in tools %}{{ t | tojson }}|{{ t | tojson(indent=1) }}|{{ t.function.name }}"
           "{% endfor %}|{{ tools | tojson }}")
    t = ChatTemplate(src, {})
    plain = [{"type": "function", "function": {"name": "é", "parameters": {"b": 1, "a": [2]}}}]
    once = [DumpedOnce(plain[0])]
    expected = t.render([user("x")], tools=plain)
    assert t.render([user("x")], tools=once) == expected
    assert t.render([user("x")], tools=once) == expected  # the kept text the second time
    assert expected.startswith('{"type": "function", "function": {"name": "é"')
