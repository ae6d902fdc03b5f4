"""gunicorn settings and master hooks for greenfront: ``gunicorn -c gunicorn.conf.py app:api``.

The configuration is read from the environment once, here. The master (``on_starting``) creates
the run directory, starts the handshake server and, in the default ``GREENFRONT_ENGINE=sim``
mode, the built-in engine simulator; engines then connect to every worker slot's sockets.
``pre_fork`` hands each worker (``runtime.worker.GreenfrontWorker``, the one seam with gunicorn)
the configuration and a stable slot (its client index), so a worker that gunicorn restarts binds
the same addresses and the engines reconnect to it.

Runs on: the gunicorn master.
"""
import ctypes
import dataclasses
import math
import os
import shlex
import signal
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from base.config import Config  # noqa: E402
from runtime.metrics_dir import prepare_multiprocess_dir  # noqa: E402
from runtime.shutdown import plan  # noqa: E402
from runtime.worker import free_slot  # noqa: E402

_config = Config.from_env()

_launched = _config.engine_mode == "launched"
bind = _config.bind
# Launched by vllm serve with several workers, engine.relay owns the inherited engine sockets.
workers = _config.worker_count
worker_class = "runtime.worker.GreenfrontWorker"
worker_connections = 10000
# Streams can be long; gevent workers heartbeat from the hub, so a long stream is not a stall.
timeout = 120
# How long the master waits for its workers after SIGTERM: the --shutdown-timeout drain and
# the exit after it (runtime/shutdown.py; vllm serve kills its frontend max(N, 5) s after SIGTERM).
graceful_timeout = math.ceil(plan(_config.shutdown_timeout, _launched)[1])
keepalive = _config.keepalive
# --ssl-keyfile/--ssl-certfile/--ssl-ca-certs/--ssl-cert-reqs: gunicorn's own TLS.
if _config.ssl_certfile:
    certfile = _config.ssl_certfile
    keyfile = _config.ssl_keyfile or None
    ca_certs = _config.ssl_ca_certs or None
    cert_reqs = _config.ssl_cert_reqs
loglevel = _config.log_level
# gunicorn 27's control socket defaults to one path per user: two deployments on one machine
# (tests, benchmarks) would fight over it. greenfront is managed by signals; turn it off.
control_socket_disable = True

_children: list[subprocess.Popen] = []
_PR_SET_PDEATHSIG = 1
_HERE = os.path.dirname(os.path.abspath(__file__))


def _die_with_parent() -> None:
    """In a child, before exec: SIGTERM when the master dies, even by SIGKILL (Linux)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _spawn(server, args: list[str], pass_fds: tuple[int, ...] = ()) -> subprocess.Popen:
    server.log.info("starting %s", " ".join(shlex.quote(a) for a in args))
    # Its own session: a terminal's Ctrl-C or a signal to the process group reaches the master,
    # which drains its workers before it stops the engines (on_exit); never left behind, since
    # it dies with the master.
    proc = subprocess.Popen(args, cwd=_HERE, start_new_session=True,
                            preexec_fn=_die_with_parent, pass_fds=pass_fds)
    _children.append(proc)
    return proc


def on_starting(server):
    global _config
    cfg = _config.with_run_dir()
    if cfg.grpc_port or cfg.grpc_listen_fd is not None:
        from rpc.listener import open_listener  # gRPC's listener, shared by the workers

        cfg = _config = open_listener(cfg)
    prepare_multiprocess_dir(cfg, server.log)
    if cfg.engine_mode == "launched":
        server.log.info("launched by vllm serve: waiting for %d engine(s) on the inherited sockets",
                        cfg.engine_count)
        _config = cfg
        if cfg.relayed:
            _start_relay(server, cfg)
        return
    handshake = cfg.handshake_address
    if not handshake:
        if cfg.engine_mode == "external":
            raise SystemExit("GREENFRONT_ENGINE=external needs GREENFRONT_HANDSHAKE_ADDRESS "
                             "(e.g. tcp://0.0.0.0:13345) for the engines to connect to")
        handshake = f"ipc://{os.path.join(cfg.run_dir, 'handshake.sock')}"
    cfg = _config = dataclasses.replace(cfg, handshake_address=handshake)
    slots = range(cfg.worker_count)
    args = [sys.executable, "-m", "engine.handshake_server", "--bind", handshake,
            "--engine-count", str(cfg.engine_count)]
    for slot in slots:
        args += ["--input", cfg.worker_address("in", slot)[1],
                 "--output", cfg.worker_address("out", slot)[1]]
    _spawn(server, args)
    if cfg.engine_mode == "sim":
        for rank in range(cfg.engine_count):
            sim = [sys.executable, "-m", "engine.sim", "--handshake", handshake, "--rank",
                   str(rank), "--data-parallel-size", str(cfg.engine_count)]
            if cfg.max_model_len:
                sim += ["--max-model-len", str(cfg.max_model_len)]
            _spawn(server, sim + shlex.split(cfg.sim_args))
    else:
        server.log.info("waiting for %d external engine(s) to handshake on %s",
                        cfg.engine_count, handshake)


def when_ready(server):
    """After the engines' helpers started (on_starting), before the first fork."""
    _preload_text(server, _config)


def _preload_text(server, cfg: Config) -> None:
    """Load the tokenizers and chat template here, before fork: the workers share them
    (text/loaded.py). It runs after the simulator, handshake server or relay were started, so
    engines register while it loads. A model that does not load is the workers' error."""
    import gc

    from text import loaded

    try:
        loaded.load(cfg.tokenizer_dir, cfg.tokenizer_backend, cfg.chat_template)
    except Exception as exc:  # noqa: BLE001 - each worker loads again and reports it
        server.log.warning("could not preload the tokenizer (%s); each worker loads its own", exc)
        return
    # Frozen, the loaded objects are never walked by a collection, in the master or in a
    # worker, so their pages stay shared.
    gc.collect()
    gc.freeze()


def _start_relay(server, cfg: Config) -> None:
    """Hand the inherited engine listeners to engine.relay, which serves every worker slot;
    the master (and so every worker) closes its copies."""
    args = [sys.executable, "-m", "engine.relay", "--input-fd", str(cfg.input_fd),
            "--output-fd", str(cfg.output_fd), "--engine-start", str(cfg.engine_start),
            "--engine-count", str(cfg.engine_count)]
    for slot in range(cfg.worker_count):
        args += ["--worker-input", cfg.worker_address("in", slot)[0],
                 "--worker-output", cfg.worker_address("out", slot)[0]]
    _spawn(server, args, pass_fds=(cfg.input_fd, cfg.output_fd))
    os.close(cfg.input_fd)
    os.close(cfg.output_fd)


def pre_fork(server, worker):
    """The worker's configuration and slot, handed over before it forks."""
    taken = (w.slot for w in server.WORKERS.values())
    worker.assign(_config, free_slot(taken, _config.worker_count))


def child_exit(server, worker):
    # A dead worker's live-only gauges leave the scrape; its counts stay in the totals.
    from runtime.metrics.registry import mark_dead

    mark_dead(worker.pid)


def on_exit(server):
    for proc in _children:
        if proc.poll() is None:
            proc.terminate()
    for proc in _children:
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            proc.kill()
    run_dir = _config.run_dir
    if run_dir and os.path.basename(run_dir).startswith("greenfront-"):
        shutil.rmtree(run_dir, ignore_errors=True)
