"""``greenfront frontend …``: what ``vllm serve`` runs with ``VLLM_USE_RUST_FRONTEND=1``
(and the command line of ``greenfront serve``, the standalone launcher: ``launch.serve``).

Accepts exactly vLLM's frontend command line (docs/engine-protocol.md §6.2), turns
``--args-json`` into greenfront settings, marks the inherited sockets inheritable and execs
gunicorn with ``GREENFRONT_WORKERS`` gevent workers (the same default as standalone) bound to the
inherited HTTP socket (``fd://N``; the gRPC one, ``--grpc-listen-fd``, served beside it). ``engine.relay`` owns the input/output listeners and serves
every worker as an engine client. Each worker waits for every engine's registration.
Exit codes: 2 for a bad command line or refused options; gunicorn's own afterwards (0 on SIGTERM,
3 when the worker halts the server: engine registration timeout, engine death).

Runs on: the launcher process, which becomes the gunicorn master.
"""
from __future__ import annotations

import argparse
import os
import sys

from launch import serve
from launch.args_json import UnsupportedOptions, settings_from_args_json
from launch.gunicorn_exec import ROOT, absolute_paths, exec_gunicorn  # noqa: F401 (ROOT for tests)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="greenfront", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    frontend = commands.add_parser("frontend", help="serve as vllm serve's frontend")
    frontend.add_argument("--listen-fd", type=int, required=True,
                          help="inherited HTTP socket (bound, not listening)")
    frontend.add_argument("--input-listener-fd", type=int, required=True,
                          help="inherited listener adopted as the engines' input ROUTER")
    frontend.add_argument("--output-listener-fd", type=int, required=True,
                          help="inherited listener adopted as the engines' output PULL")
    frontend.add_argument("--engine-start-index", type=int, default=0)
    frontend.add_argument("--engine-count", type=int, default=1)
    # Deployment-wide DP size: the coordinator's counts are sliced by start index and count.
    frontend.add_argument("--data-parallel-size", type=int, default=None)
    frontend.add_argument("--coordinator-address", default=None)
    frontend.add_argument("--grpc-listen-fd", type=int, default=None,
                          help="inherited gRPC socket (bound, not listening): docs/grpc.md")
    frontend.add_argument("--args-json", required=True)
    serve.add_parser(commands)
    return parser


def launch_settings(ns: argparse.Namespace) -> dict[str, str]:
    """Every GREENFRONT_* setting of a launched frontend."""
    settings = settings_from_args_json(ns.args_json)
    absolute_paths(settings)
    settings.update({
        "GREENFRONT_ENGINE": "launched",
        "GREENFRONT_BIND": f"fd://{ns.listen_fd}",
        "GREENFRONT_INPUT_FD": str(ns.input_listener_fd),
        "GREENFRONT_OUTPUT_FD": str(ns.output_listener_fd),
        "GREENFRONT_ENGINE_START": str(ns.engine_start_index),
        "GREENFRONT_ENGINE_COUNT": str(ns.engine_count),
        "GREENFRONT_COORDINATOR_ADDRESS": ns.coordinator_address or "",
    })
    if ns.grpc_listen_fd is not None:  # vllm serve bound the gRPC port: serve that socket
        settings["GREENFRONT_GRPC_LISTEN_FD"] = str(ns.grpc_listen_fd)
        settings.pop("GREENFRONT_GRPC_PORT", None)
    return settings


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    ns, extra = parser.parse_known_args(argv)
    if ns.command == "serve":
        return serve.main(ns, extra)
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        settings = launch_settings(ns)
    except (ValueError, UnsupportedOptions) as exc:
        print(f"greenfront: {exc}", file=sys.stderr)
        return 2
    inherited = (ns.listen_fd, ns.input_listener_fd, ns.output_listener_fd)
    if ns.grpc_listen_fd is not None:
        inherited += (ns.grpc_listen_fd,)
    for fd in inherited:
        try:
            os.set_inheritable(fd, True)
        except OSError as exc:
            print(f"greenfront: inherited fd {fd} is not usable: {exc}", file=sys.stderr)
            return 2
    exec_gunicorn(settings)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
