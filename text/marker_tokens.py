"""The marker tokens of the tool-call and reasoning formats greenfront parses (data only).

``text.make_default_model --markers`` renames unused ``<SPECIAL_i>`` control tokens of the
Tekken tokenizer to these strings, so one test model directory tokenizes every family's markers
as single ids, the way each family's own tokenizer does. The ``special`` flag follows the
family's tokenizer where it is known (Qwen marks ``<think>``/``<tool_call>`` as ordinary added
tokens; control tokens of Llama, Mistral, Kimi and harmony are special): it decides whether
``skip_special_tokens`` drops them from the text.

Runs on: the build step (``make``), never at request time.
"""
from __future__ import annotations

#: First Tekken control id that is an unused filler (``<SPECIAL_20>``); ids below are Mistral's.
FIRST_FREE_ID = 20

#: (marker text, special) in the order they are given ids from FIRST_FREE_ID upwards.
MARKERS: tuple[tuple[str, bool], ...] = (
    # Hermes / Qwen (ChatML) and the <think> family (deepseek_r1, qwen3, glm45, kimi, minimax)
    ("<tool_call>", False), ("</tool_call>", False), ("<think>", False), ("</think>", False),
    ("<|im_start|>", True), ("<|im_end|>", True), ("<tool_response>", False),
    ("</tool_response>", False),
    # Mistral (v11+ tool calls, magistral thinking)
    ("[ARGS]", True), ("[CALL_ID]", True), ("[THINK]", True), ("[/THINK]", True),
    # Llama 3.x
    ("<|python_tag|>", True), ("<|eom_id|>", True), ("<|eot_id|>", True),
    ("<|begin_of_text|>", True), ("<|start_header_id|>", True), ("<|end_header_id|>", True),
    # Llama 4
    ("<|python_start|>", True), ("<|python_end|>", True), ("<|eom|>", True), ("<|eot|>", True),
    ("<|header_start|>", True), ("<|header_end|>", True),
    # DeepSeek V3 / V3.1
    ("<｜tool▁calls▁begin｜>", False), ("<｜tool▁calls▁end｜>", False),
    ("<｜tool▁call▁begin｜>", False), ("<｜tool▁call▁end｜>", False), ("<｜tool▁sep｜>", False),
    ("<｜tool▁outputs▁begin｜>", False), ("<｜tool▁outputs▁end｜>", False),
    ("<｜tool▁output▁begin｜>", False), ("<｜tool▁output▁end｜>", False),
    ("<｜begin▁of▁sentence｜>", True), ("<｜end▁of▁sentence｜>", True), ("<｜User｜>", False),
    ("<｜Assistant｜>", False),
    # Kimi K2
    ("<|tool_calls_section_begin|>", True), ("<|tool_calls_section_end|>", True),
    ("<|tool_call_section_begin|>", True), ("<|tool_call_section_end|>", True),
    ("<|tool_call_begin|>", True), ("<|tool_call_end|>", True),
    ("<|tool_call_argument_begin|>", True), ("<|im_user|>", True), ("<|im_assistant|>", True),
    ("<|im_middle|>", True),
    # GLM 4.5 / 4.7
    ("<arg_key>", True), ("</arg_key>", True), ("<arg_value>", True), ("</arg_value>", True),
    ("<|user|>", True), ("<|assistant|>", True), ("<|observation|>", True), ("<|system|>", True),
    ("[gMASK]", True), ("<sop>", True),
    # MiniMax M2
    ("<minimax:tool_call>", False), ("</minimax:tool_call>", False),
    # gpt-oss (harmony)
    ("<|start|>", True), ("<|end|>", True), ("<|message|>", True), ("<|channel|>", True),
    ("<|constrain|>", True), ("<|return|>", True), ("<|call|>", True),
    ("<|startoftext|>", True), ("<|endoftext|>", True),
    # Granite 3.x
    ("<|tool_call|>", True), ("<|start_of_role|>", True), ("<|end_of_role|>", True),
    ("<|end_of_text|>", True),
)

#: ChatML with Hermes-style tools: every family's parser reads the model's *output*, so one
#: template that renders tool definitions, assistant ``tool_calls`` and ``tool`` results is
#: enough for multi-turn tests (the output format is scripted per test).
TOOL_CHAT_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\n"
    "{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] + '\\n\\n' }}{%- endif %}"
    "# Tools\n\n<tools>"
    "{%- for tool in tools %}\n{{- tool | tojson }}{%- endfor %}"
    "\n</tools><|im_end|>\n"
    "{%- elif messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'user' or (message['role'] == 'assistant' and not message.tool_calls) %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + (message['content'] or '') + '<|im_end|>\\n' }}"
    "{%- elif message['role'] == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' + (message['content'] or '') }}"
    "{%- for tool_call in message.tool_calls %}"
    "{%- set call = tool_call.function if tool_call.function is defined else tool_call %}"
    "{{- '\\n<tool_call>\\n{\"name\": \"' + call.name + '\", \"arguments\": ' }}"
    "{%- if call.arguments is string %}{{- call.arguments }}{%- else %}{{- call.arguments | tojson }}{%- endif %}"
    "{{- '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif message['role'] == 'tool' %}"
    "{{- '<|im_start|>user\\n<tool_response>\\n' + message['content'] + '\\n</tool_response><|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
