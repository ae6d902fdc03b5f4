"""``greenfront serve MODEL [options]``: the standalone launcher, with ``vllm serve``'s options.

The options are those of ``launch.args_json``'s one table, with the meaning they have in
``--args-json``: this module only turns a command line into the same option dict
(``{"served_model_name": [...], "api_key": [...], ...}``) and hands it to
``settings_from_args_json``. Each honoured option becomes a command-line flag by its converter:
a ``_flag`` option is a switch, a ``_names`` option takes one or more values, the rest one value.
Frontend options greenfront does not implement are refused together with exit 2, as are options
no table knows (engine options belong to the engines' own command line). Then gunicorn is
exec'd with greenfront and its simulator (or, with ``--engine external``, waiting for engines
on ``--handshake-address``); the environment settings keep working and the command line wins.

Runs on: the launcher process, which becomes the gunicorn master.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from launch.args_json import (HONOURED, NO_EFFECT, UNSUPPORTED, UnsupportedOptions, arg_kind,
                              settings_from_args_json)
from launch.gunicorn_exec import absolute_paths, exec_gunicorn

#: Options of ``greenfront serve`` that ``vllm serve`` does not have.
OWN = ("engine", "handshake_address", "workers", "data_parallel_size", "uds")


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """The ``serve`` sub-command, with one flag per honoured option of the table."""
    serve = commands.add_parser(
        "serve", help="serve standalone (with the simulator or external engines)",
        description="greenfront serve MODEL [options]: vllm serve's frontend options.",
        # No prefixes: `--grpc` (refused) must not be taken for `--grpc-port`.
        allow_abbrev=False)
    serve.add_argument("model_tag", metavar="MODEL", help="model directory or hub id")
    serve.add_argument("--host", default=None)
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--uds", default=None, metavar="PATH",
                       help="serve HTTP on this unix socket instead of --host/--port")
    serve.add_argument("--engine", choices=("sim", "external"), default=None,
                       help="sim (default): start the built-in simulator; external: wait for "
                            "engines (vllm serve --headless) on --handshake-address")
    serve.add_argument("--handshake-address", default=None,
                       help="where engines connect, e.g. tcp://0.0.0.0:13345")
    serve.add_argument("--workers", type=int, default=None, help="gunicorn workers")
    serve.add_argument("--data-parallel-size", type=int, default=None,
                       help="engines (DP ranks) to start or wait for")
    for name in sorted(HONOURED):
        flag = "--" + name.replace("_", "-")
        kind = arg_kind(name)
        if kind == "flag":
            serve.add_argument(flag, dest=name, action="store_true", default=None)
            # vLLM's switches take --no-X too (argparse's BooleanOptionalAction).
            serve.add_argument("--no-" + flag[2:], dest=name, action="store_false",
                               default=None)
        elif kind == "list":
            serve.add_argument(flag, dest=name, nargs="+", default=None)
        elif kind == "json":
            serve.add_argument(flag, dest=name, type=json.loads, default=None)
        else:
            serve.add_argument(flag, dest=name, default=None)
    return serve


def _refusals(extra: list[str]) -> tuple[list[str], list[str]]:
    """(unimplemented frontend options, unknown options) among the unparsed arguments."""
    refused, unknown = [], []
    for token in extra:
        if not token.startswith("--"):
            continue
        name = token[2:].split("=", 1)[0].replace("-", "_")
        if name.startswith("no_"):
            name = name[3:]
        if name in UNSUPPORTED:
            refused.append(name)
        elif name not in NO_EFFECT:
            unknown.append(token.split("=", 1)[0])
    return refused, unknown


def serve_settings(ns: argparse.Namespace, extra: list[str]) -> dict[str, str]:
    """Every GREENFRONT_* setting of ``greenfront serve``.

    Raises:
        UnsupportedOptions: unimplemented frontend options were given.
        ValueError: options nobody knows, or a bad value.
    """
    refused, unknown = _refusals(extra)
    if refused:
        raise UnsupportedOptions(sorted(set(refused)), "use vllm serve with its own frontend")
    if unknown:
        raise ValueError("unknown options: " + ", ".join(unknown) + " (greenfront serve takes "
                         "vllm serve's frontend options; engine options go to the engines' "
                         "command line)")
    options = {k: v for k, v in vars(ns).items()
               if v is not None and k not in OWN + ("command", "host", "port")}
    settings = settings_from_args_json(json.dumps(options))
    absolute_paths(settings)
    host = ns.host if ns.host is not None else "0.0.0.0"
    settings["GREENFRONT_BIND"] = f"[{host}]:{ns.port}" if ":" in host else f"{host}:{ns.port}"
    if ns.uds is not None:  # as vLLM: the unix socket only, no TCP port
        settings["GREENFRONT_BIND"] = f"unix:{ns.uds}"
    for value, name in ((ns.engine, "GREENFRONT_ENGINE"),
                        (ns.handshake_address, "GREENFRONT_HANDSHAKE_ADDRESS"),
                        (ns.workers, "GREENFRONT_WORKERS"),
                        (ns.data_parallel_size, "GREENFRONT_ENGINE_COUNT")):
        if value is not None:
            settings[name] = str(value)
    return settings


def main(ns: argparse.Namespace, extra: list[str]) -> int:
    """Validate, then exec gunicorn (returns only with exit code 2 on a refusal)."""
    try:
        settings = serve_settings(ns, extra)
    except (ValueError, UnsupportedOptions) as exc:
        print(f"greenfront serve: {exc}", file=sys.stderr)
        return 2
    exec_gunicorn(settings)
    return 0  # not reached
