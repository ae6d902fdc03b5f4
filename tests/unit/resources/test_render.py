"""Byte-for-byte checks of the captured bodies and streams of docs/text-parity.md §6.4 and §3.2.

Only ``id`` and ``created`` are normalized; everything else (field order, nulls, fingerprint
placement, usage key order, hold-back deltas) must match vLLM 0.32's Python frontend.
"""
from __future__ import annotations


from engine.protocol import EngineCoreOutput, LogprobsTensors, encode_ndarray
from resources.chat import prepare_chat
from resources.chat.render import render_chat_response
from streaming.output import RequestState
from streaming.sse import error_event
from base.errors import ServerError
from tests.support.normalize import normalized_text

FRANCE = [3795, 115370, 73750, 4756, 27797, 35424, 4756, 27797]
SAY_HI = [40571, 82503, 5533, 79904, 10817, 51390, 54961, 66030]
FP = "vllm-0.32.0-416808fb"
BASE = {"model": "tiny", "prompt": "The capital of France is", "temperature": 0}
CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "Say hi"}], "temperature": 0}


def norm(data: bytes) -> str:
    return normalized_text(data, ("id", "created"))


def sse(*events: str) -> str:
    return "".join(f"data: {e}\n\n" for e in events) + "data: [DONE]\n\n"


def c_choice(text, finish=None, extra=""):
    return ('{"index":0,"text":"' + text + '","logprobs":null,"finish_reason":'
            + ("null" if finish is None else f'"{finish}"') + ',"stop_reason":null,'
            '"prompt_token_ids":null,"token_ids":null}' + extra)


C_HEAD = '{"id":"*","object":"text_completion","created":"*","model":"tiny","choices":['
T_HEAD = '{"id":"*","object":"chat.completion.chunk","created":"*","model":"tiny","choices":['
ROLE = ('{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,'
        '"finish_reason":null}')
TAIL = ('"service_tier":null,"system_fingerprint":"' + FP + '","usage":{"prompt_tokens":6,'
        '"total_tokens":{t},"completion_tokens":{c},"prompt_tokens_details":null,'
        '"completion_tokens_details":null},"kv_transfer_params":null,"ec_transfer_params":null,'
        '"metrics":null}')


def tail(total, completion):
    return TAIL.replace("{t}", str(total)).replace("{c}", str(completion))


def content(text, finish=None):
    end = "null" if finish is None else f'"{finish}","stop_reason":null'
    return ('{"index":0,"delta":{"content":"' + text + '"},"logprobs":null,"finish_reason":'
            + end + ',"token_ids":null}')


def test_completion_bodies(run):
    body = run("completion", {**BASE, "max_tokens": 8}, FRANCE)
    assert norm(body) == (
        '{"id":"*","object":"text_completion","created":"*","model":"tiny","choices":[{"index":0,'
        '"text":":** нельзя bernKey Execut�Key Execut","logprobs":null,"finish_reason":"length",'
        '"stop_reason":null,"token_ids":null,"prompt_logprobs":null,"prompt_token_ids":null,'
        '"routed_experts":null}],' + tail(14, 8))
    body = run("completion", {**BASE, "max_tokens": 8, "return_token_ids": True}, FRANCE)
    assert norm(body) == (
        '{"id":"*","object":"text_completion","created":"*","model":"tiny","choices":[{"index":0,'
        '"text":":** нельзя bernKey Execut�Key Execut","logprobs":null,"finish_reason":"length",'
        '"stop_reason":null,"token_ids":[3795,115370,73750,4756,27797,35424,4756,27797],'
        '"prompt_logprobs":null,"prompt_token_ids":[1,1784,8961,1307,5498,1395],'
        '"routed_experts":null}],' + tail(14, 8))
    body = run("completion", {**BASE, "max_tokens": 8, "stop": ["bern"],
                              "return_token_ids": True}, FRANCE)
    assert norm(body) == (
        '{"id":"*","object":"text_completion","created":"*","model":"tiny","choices":[{"index":0,'
        '"text":":** нельзя ","logprobs":null,"finish_reason":"stop","stop_reason":"bern",'
        '"token_ids":[3795,115370,73750],"prompt_logprobs":null,"prompt_token_ids":[1,1784,8961,'
        '1307,5498,1395],"routed_experts":null}],' + tail(9, 3))


def test_multi_prompt_body(ctx):
    from resources.completions import prepare_completion
    from resources.completions.render import render_completion_response
    p = prepare_completion({"model": "tiny", "prompt": ["Hello", "The capital of France is"],
                            "max_tokens": 3, "temperature": 0, "return_token_ids": True}, ctx)
    state = RequestState(p, ctx)
    # Outputs interleave in engine order; choice 1 first here.
    for step in range(3):
        fin = 1 if step == 2 else None
        state.add(1, EngineCoreOutput("b", [FRANCE[step]], finish_reason=fin))
        state.add(0, EngineCoreOutput("a", [[10736, 2549, 121955][step]], finish_reason=fin))
    assert norm(render_completion_response(p, state)) == (
        '{"id":"*","object":"text_completion","created":"*","model":"tiny","choices":[{"index":0,'
        '"text":" .. what suya","logprobs":null,"finish_reason":"length","stop_reason":null,'
        '"token_ids":[10736,2549,121955],"prompt_logprobs":null,"prompt_token_ids":[1,22177],'
        '"routed_experts":null},{"index":1,"text":":** нельзя bern","logprobs":null,'
        '"finish_reason":"length","stop_reason":null,"token_ids":[3795,115370,73750],'
        '"prompt_logprobs":null,"prompt_token_ids":[1,1784,8961,1307,5498,1395],'
        '"routed_experts":null}],"service_tier":null,"system_fingerprint":"' + FP + '","usage":'
        '{"prompt_tokens":8,"total_tokens":14,"completion_tokens":6,"prompt_tokens_details":null,'
        '"completion_tokens_details":null},"kv_transfer_params":null,"ec_transfer_params":null,'
        '"metrics":null}')


def test_completion_streams(run):
    words = [":**", " нельзя", " bern", "Key", " Execut"]
    plain = run("completion", {**BASE, "max_tokens": 5, "stream": True}, FRANCE[:5])
    assert norm(plain) == sse(*[C_HEAD + c_choice(w) + "]}" for w in words[:4]],
                              C_HEAD + c_choice(" Execut", "length") + '],"system_fingerprint":"'
                              + FP + '"}')
    usage = run("completion", {**BASE, "max_tokens": 5, "stream": True,
                               "stream_options": {"include_usage": True}}, FRANCE[:5])
    assert norm(usage) == sse(
        *[C_HEAD + c_choice(w) + "]}" for w in words[:4]],
        C_HEAD + c_choice(" Execut", "length") + "]}",
        C_HEAD + '],"usage":{"prompt_tokens":6,"total_tokens":11,"completion_tokens":5},'
        '"system_fingerprint":"' + FP + '"}')
    cont = run("completion", {**BASE, "max_tokens": 3, "stream": True, "stream_options": {
        "include_usage": True, "continuous_usage_stats": True}}, FRANCE[:3])
    u = '"usage":{{"prompt_tokens":6,"total_tokens":{},"completion_tokens":{}}}}}'
    assert norm(cont) == sse(
        C_HEAD + c_choice(":**") + "]," + u.format(7, 1),
        C_HEAD + c_choice(" нельзя") + "]," + u.format(8, 2),
        C_HEAD + c_choice(" bern", "length") + "]," + u.format(9, 3),
        C_HEAD + '],"usage":{"prompt_tokens":6,"total_tokens":9,"completion_tokens":3},'
        '"system_fingerprint":"' + FP + '"}')


def test_completion_stream_stop_token_and_echo(run):
    stop = run("completion", {**BASE, "max_tokens": 8, "stream": True, "stop_token_ids": [73750],
                              "return_token_ids": True}, FRANCE[:3], finish=0, stop_reason=73750)
    assert norm(stop) == sse(
        C_HEAD + '{"index":0,"text":":**","logprobs":null,"finish_reason":null,"stop_reason":null,'
        '"prompt_token_ids":[1,1784,8961,1307,5498,1395],"token_ids":[3795]}]}',
        C_HEAD + '{"index":0,"text":" нельзя","logprobs":null,"finish_reason":null,'
        '"stop_reason":null,"prompt_token_ids":null,"token_ids":[115370]}]}',
        C_HEAD + '{"index":0,"text":"","logprobs":null,"finish_reason":"stop","stop_reason":73750,'
        '"prompt_token_ids":null,"token_ids":[73750]}],"system_fingerprint":"' + FP + '"}')
    echo = run("completion", {"model": "tiny", "prompt": "Hello", "max_tokens": 2, "echo": True,
                              "stream": True}, [10736, 2549])
    assert norm(echo) == sse(
        C_HEAD + '{"index":0,"text":"Hello ..","logprobs":null,"finish_reason":null,'
        '"stop_reason":null,"prompt_token_ids":[1,22177],"token_ids":null}]}',
        C_HEAD + c_choice(" what", "length") + '],"system_fingerprint":"' + FP + '"}')


def test_stop_string_holdback_streams(run):
    held = run("completion", {**BASE, "max_tokens": 8, "stream": True,
                              "stop": ["Exe", "nothing-matches-here"]}, FRANCE)
    final = ('{"index":0,"text":":** нельзя bernKey ","logprobs":null,"finish_reason":"stop",'
             '"stop_reason":"Exe","prompt_token_ids":null,"token_ids":null}')
    assert norm(held) == sse(*[C_HEAD + c_choice("") + "]}"] * 4,
                             C_HEAD + final + '],"system_fingerprint":"' + FP + '"}')
    none = run("completion", {**BASE, "max_tokens": 5, "stream": True, "stop": ["zzzzzz"]},
               FRANCE[:5])
    assert [e.split('"text":"')[1].split('"')[0] for e in norm(none).split("\n\n")[:5]] == [
        "", ":** н", "ельзя", " be", "rnKey Execut"]
    chat = run("chat", {**CHAT, "stream": True, "stop": ["Über"]}, SAY_HI)
    deltas = [e.split('"content":"')[1].split('"')[0] for e in norm(chat).split("\n\n")[1:5]]
    assert deltas == ["", "ե", "յিযi", "ple"]
    assert '"finish_reason":"stop","stop_reason":"Über"' in norm(chat)


def test_stop_string_table(run):
    """docs/text-parity.md §3.2: text / finish / completion_tokens for each stop configuration."""
    def result(**extra):
        body = norm(run("completion", {**BASE, "max_tokens": 8, **extra}, FRANCE))
        text = body.split('"text":"')[1].split('","logprobs"')[0]
        finish = body.split('"finish_reason":')[1].split(',"token_ids"')[0]
        return text, finish, int(body.split('"completion_tokens":')[1].split(",")[0])
    assert result(stop=["bern"]) == (":** нельзя ", '"stop","stop_reason":"bern"', 3)
    assert result(stop=["bern"], include_stop_str_in_output=True) == (
        ":** нельзя bern", '"stop","stop_reason":"bern"', 3)
    assert result(stop=["ль"]) == (":** не", '"stop","stop_reason":"ль"', 2)
    assert result(stop=["nKey"]) == (":** нельзя ber", '"stop","stop_reason":"nKey"', 4)
    assert result(stop=["Key", "bern"]) == (":** нельзя ", '"stop","stop_reason":"bern"', 3)
    assert result(stop=["bern"], min_tokens=2) == (":** нельзя ", '"stop","stop_reason":"bern"',
                                                   3)
    assert result(stop=["bern"], min_tokens=3) == (
        ":** нельзя bernKey Execut�Key Execut", '"length","stop_reason":null', 8)


def test_chat_bodies(run, ctx):
    body = run("chat", {**CHAT, "max_tokens": 8}, SAY_HI)
    assert norm(body) == (
        '{"id":"*","object":"chat.completion","created":"*","model":"tiny","choices":[{"index":0,'
        '"message":{"role":"assistant","content":"եյিযipleÜberർinomború Literatura","refusal":'
        'null,"annotations":null,"audio":null,"function_call":null,"reasoning":null},"logprobs":'
        'null,"finish_reason":"length","stop_reason":null,"token_ids":null,"routed_experts":null}'
        '],"service_tier":null,"system_fingerprint":"' + FP + '","usage":{"prompt_tokens":5,'
        '"total_tokens":13,"completion_tokens":8,"prompt_tokens_details":null,'
        '"completion_tokens_details":null},"prompt_logprobs":null,"prompt_token_ids":null,'
        '"prompt_text":null,"kv_transfer_params":null,"ec_transfer_params":null,"metrics":null}')


def test_chat_echo_with_prompt_logprobs(ctx):
    p = prepare_chat({"model": "tiny", "messages": [{"role": "user", "content": "Hi"},
                                                    {"role": "assistant", "content": "Hello"}],
                      "add_generation_prompt": False, "continue_final_message": True,
                      "echo": True, "return_token_ids": True, "max_tokens": 3}, ctx)
    state = RequestState(p, ctx)
    lps = [-11.317124366760254, -11.490591049194336, -11.751331329345703, -12.166324615478516]
    tensors = LogprobsTensors(encode_ndarray([[3], [37133], [4], [22177]], "int32"),
                              encode_ndarray([[x] for x in lps], "float32"),
                              encode_ndarray([2021, 10448, 52421, 123703], "int64"))
    state.add(0, EngineCoreOutput("r", [101727], new_prompt_logprobs_tensors=tensors))
    state.add(0, EngineCoreOutput("r", [64659]))
    state.add(0, EngineCoreOutput("r", [119677], finish_reason=1))
    assert norm(render_chat_response(p, state)) == (
        '{"id":"*","object":"chat.completion","created":"*","model":"tiny","choices":[{"index":0,'
        '"message":{"role":"assistant","content":"Hello paved النظ自己的","refusal":null,'
        '"annotations":null,"audio":null,"function_call":null,"reasoning":null},"logprobs":null,'
        '"finish_reason":"length","stop_reason":null,"token_ids":[101727,64659,119677],'
        '"routed_experts":null}],"service_tier":null,"system_fingerprint":"' + FP + '","usage":{'
        '"prompt_tokens":5,"total_tokens":8,"completion_tokens":3,"prompt_tokens_details":null,'
        '"completion_tokens_details":null},"prompt_logprobs":[null,{"3":{"logprob":'
        '-11.317124366760254,"rank":2021,"decoded_token":"[INST]"}},{"37133":{"logprob":'
        '-11.490591049194336,"rank":10448,"decoded_token":"Hi"}},{"4":{"logprob":'
        '-11.751331329345703,"rank":52421,"decoded_token":"[/INST]"}},{"22177":{"logprob":'
        '-12.166324615478516,"rank":123703,"decoded_token":"Hello"}}],"prompt_token_ids":[1,3,'
        '37133,4,22177],"prompt_text":null,"kv_transfer_params":null,"ec_transfer_params":null,'
        '"metrics":null}')


def test_chat_streams(run):
    words = ["եյ", "িয", "iple", "Über"]
    first = T_HEAD + ROLE + '],"prompt_token_ids":null,"prompt_text":null}'
    plain = run("chat", {**CHAT, "max_tokens": 5, "stream": True}, SAY_HI[:5])
    assert norm(plain) == sse(first, *[T_HEAD + content(w) + "]}" for w in words],
                              T_HEAD + content("ർ", "length") + '],"system_fingerprint":"' + FP
                              + '"}')
    usage = run("chat", {**CHAT, "max_tokens": 5, "stream": True,
                         "stream_options": {"include_usage": True}}, SAY_HI[:5])
    assert norm(usage) == sse(first, *[T_HEAD + content(w) + "]}" for w in words],
                              T_HEAD + content("ർ", "length") + "]}",
                              T_HEAD + '],"usage":{"prompt_tokens":5,"total_tokens":10,'
                              '"completion_tokens":5},"system_fingerprint":"' + FP + '"}')
    cont = run("chat", {**CHAT, "max_tokens": 3, "stream": True, "stream_options": {
        "include_usage": True, "continuous_usage_stats": True}}, SAY_HI[:3])
    u = ('"usage":{{"prompt_tokens":5,"total_tokens":{},"completion_tokens":{},'
         '"completion_tokens_details":null}}')
    assert norm(cont) == sse(
        T_HEAD + ROLE + "]," + u.format(5, 0) + ',"prompt_token_ids":null,"prompt_text":null}',
        T_HEAD + content("եյ") + "]," + u.format(6, 1) + "}",
        T_HEAD + content("িয") + "]," + u.format(7, 2) + "}",
        T_HEAD + content("iple", "length") + "]," + u.format(8, 3) + "}",
        T_HEAD + '],"usage":{"prompt_tokens":5,"total_tokens":8,"completion_tokens":3},'
        '"system_fingerprint":"' + FP + '"}')
    eos = run("chat", {**CHAT, "stream": True, "logit_bias": {"2": 100}, "min_tokens": 1,
                       "stream_options": {"include_usage": True}}, [40571, 2], finish=0)
    assert norm(eos) == sse(first, T_HEAD + content("եյ") + "]}",
                            T_HEAD + content("", "stop") + "]}",
                            T_HEAD + '],"usage":{"prompt_tokens":5,"total_tokens":7,'
                            '"completion_tokens":2},"system_fingerprint":"' + FP + '"}')


def test_mid_stream_error_event():
    assert error_event(ServerError("Internal server error")) == (
        b'data: {"error": {"message": "Internal server error", "type": "InternalServerError", '
        b'"param": null, "code": 500}}\n\ndata: [DONE]\n\n')
