"""Nothing vLLM 0.32 accepts is silently ignored: every ``vllm serve`` option and every request
field of its completions, chat and generate models is implemented or refused by greenfront.

``tests/unit/data/vllm_032_surface.json`` was generated once from vLLM 0.32
(``tests/unit/data/gen_vllm_032_surface.py``, run in its venv): the ``vllm serve`` parser's
options, each marked engine (``AsyncEngineArgs``), frontend (``FrontendArgs``) or serve (the
sub-command's own), and the fields of ``ChatCompletionRequest``, ``CompletionRequest`` and the
token-in/token-out ``GenerateRequest``. A new vLLM release: regenerate, and this test names
what greenfront must decide.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from base.errors import ApiError
from launch.args_json import (HONOURED, NO_EFFECT, UNSUPPORTED, UnsupportedOptions,
                              settings_from_args_json)
from launch.engine_options import ENGINE_ONLY
from launch.frontend import build_parser
from launch.serve import OWN, serve_settings
from resources.chat import types as chat_types
from resources.common.newer_fields import TEXT_ONLY_NO_EFFECT, UNSERVED, refuse_unserved
from resources.completions import types as completion_types
from resources.generate import types as generate_types

SURFACE = json.loads((Path(__file__).parent / "data" / "vllm_032_surface.json").read_text())
OPTIONS = SURFACE["serve_options"]

#: Being built by other helpers right now: refused until their work lands. At merge, the lead
#: moves a line from here when its feature is implemented (and this test then checks it is no
#: longer refused).
PENDING_ELSEWHERE = {
    "grpc": "gRPC",
    "pooler_config": "pooling", "io_processor_plugin": "pooling",
}

IMPLEMENTED = set(HONOURED) | NO_EFFECT | set(OWN)


def status(name: str) -> str:
    """greenfront's status of one option: implemented, refused or engine (the engines')."""
    found = [label for label, table in (("implemented", IMPLEMENTED), ("refused", UNSUPPORTED),
                                        ("engine", ENGINE_ONLY)) if name in table]
    assert len(found) == 1, f"--{name}: in {found or 'no table'}"
    return found[0]


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_every_vllm_serve_option_has_one_status(name):
    got = status(name)
    if OPTIONS[name]["kind"] != "engine":
        assert got != "engine", f"--{name} is a frontend option: implement or refuse it"


@pytest.mark.parametrize("name", sorted(n for n in OPTIONS if n in UNSUPPORTED))
def test_refused_options_are_refused_on_both_launch_paths(name):
    with pytest.raises(UnsupportedOptions) as info:
        settings_from_args_json(json.dumps({"model_tag": "/m", name: "x"}))
    assert name in info.value.names
    ns, extra = build_parser().parse_known_args(["serve", "/m", f"--{name.replace('_', '-')}",
                                                 "x"])
    with pytest.raises(UnsupportedOptions) as info:
        serve_settings(ns, extra)
    assert name in info.value.names


@pytest.mark.parametrize("name", sorted(PENDING_ELSEWHERE))
def test_pending_features_are_refused_for_now(name):
    assert name in OPTIONS and status(name) == "refused", PENDING_ELSEWHERE[name]


@pytest.mark.parametrize("name", sorted(n for n in OPTIONS if n in HONOURED))
def test_implemented_options_are_flags_of_greenfront_serve(name):
    flags = {a.dest for a in build_parser()._subparsers._group_actions[0].choices["serve"]
             ._actions}
    assert name in flags


def test_fingerprint_mode_is_applied_on_greenfront_serve():
    ns, extra = build_parser().parse_known_args(["serve", "/m", "--fingerprint-mode", "none"])
    assert serve_settings(ns, extra)["GREENFRONT_SYSTEM_FINGERPRINT"] == ""
    ns, extra = build_parser().parse_known_args(["serve", "/m", "--fingerprint-mode", "custom",
                                                 "--fingerprint-value", "fp-1"])
    assert serve_settings(ns, extra)["GREENFRONT_SYSTEM_FINGERPRINT"] == "fp-1"


DECLARED = {
    "chat": {f[0] for f in chat_types.fields(16)},
    "completions": {f[0] for f in completion_types.fields(16)},
    "generate": {f[0] for f in generate_types.HEAD + generate_types.TAIL} | {"sampling_params"},
}


@pytest.mark.parametrize("endpoint,field", [(e, f) for e, fields in
                                            SURFACE["request_fields"].items() for f in fields])
def test_every_request_field_is_declared_or_refused(endpoint, field):
    unserved = UNSERVED.get(endpoint, {})
    assert (field in DECLARED[endpoint]) + (field in unserved) + (
        field in TEXT_ONLY_NO_EFFECT) == 1, f"{endpoint}: {field}"
    if field in unserved:
        refuse_unserved({}, endpoint)  # absent: served
        with pytest.raises(ApiError) as info:
            refuse_unserved({field: "x"}, endpoint)
        assert info.value.status == 400 and field in info.value.message
