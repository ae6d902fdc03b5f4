"""TokenIds: the same ints as a list on every path (msgpack ADD, JSON, Sequence use)."""
from __future__ import annotations

import os

import msgspec
import numpy as np
import pytest

from base import jsonio
from engine.protocol import EngineCoreRequest, SamplingParams, codec
from text.tokenizer import Tokenizer
from base.token_ids import TokenIds, as_list

MODEL_DIR = os.environ.get("GREENFRONT_TEST_MODEL_DIR", "models/tekken-tiny")


def _ids(values: list[int]) -> TokenIds:
    return TokenIds(np.array(values, dtype=np.uint32))


@pytest.mark.parametrize("values", [
    [], [0], [5, 127, 128, 255, 256], list(range(15)), list(range(16)),
    list(range(65535)), list(range(65536)), [65535, 65536, 2 ** 31 - 1],
    [131071] * 70000,
])
def test_msgpack_decodes_to_the_same_ints(values):
    assert msgspec.msgpack.decode(_ids(values).msgpack()) == values


def test_json_is_the_lists_json():
    values = [0, 1, 300, 70000, 131071]
    body = {"count": 5, "tokens": _ids(values)}
    assert jsonio.dumps(body) == jsonio.dumps({"count": 5, "tokens": values})


def test_sequence_behaviour():
    ids = _ids([1, 2, 3, 70000])
    assert len(ids) == 4 and ids[0] == 1 and ids[-1] == 70000
    assert ids[1:3] == [2, 3] and isinstance(ids[1:3], list)
    assert list(ids) == [1, 2, 3, 70000] and list(reversed(ids)) == [70000, 3, 2, 1]
    assert ids == [1, 2, 3, 70000] and ids == _ids([1, 2, 3, 70000]) and ids != [1, 2]
    assert as_list(ids) == [1, 2, 3, 70000] and not _ids([])


def test_add_with_token_ids_decodes_as_with_a_list():
    values = list(range(1000, 90000, 3))

    def request(prompt):
        return EngineCoreRequest(request_id="r-1", prompt_token_ids=prompt, mm_features=None,
                                 sampling_params=SamplingParams(max_tokens=4),
                                 pooling_params=None, arrival_time=1.5, lora_request=None,
                                 cache_salt=None, data_parallel_rank=None)
    frames = codec.encode_add(b"\x00\x00", request(_ids(values)))
    _, decoded = codec.decode_request(frames[1:])
    assert decoded == codec.decode_request(codec.encode_add(b"", request(values))[1:])[1]
    assert decoded.prompt_token_ids == values


def test_fastokens_flat_ids_equal_hf_ids():
    fast = Tokenizer.load(MODEL_DIR, backend="fastokens")
    hf = Tokenizer.load(MODEL_DIR, backend="hf")
    texts = ["Hello world", "", "[INST] a b [/INST]", "x" * 5000 + " déjà vu привет"]
    for add in (True, False):
        got = fast.encode_many(texts, add)
        assert all(isinstance(ids, TokenIds) for ids in got)
        assert [list(ids) for ids in got] == hf.encode_many(texts, add)
