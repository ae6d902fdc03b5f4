"""gunicorn settings and hooks for greenfront: ``gunicorn -c gunicorn.conf.py app:api``.

The master (``on_starting``) creates the run directory, starts the handshake server and, in the
default ``GREENFRONT_ENGINE=sim`` mode, the built-in engine simulator; engines then connect to
every worker slot's sockets. ``pre_fork`` gives each worker a stable slot (its client index), so
a worker that gunicorn restarts binds the same addresses and the engines reconnect to it.

Runs on: the gunicorn master (settings, on_starting, when_ready, pre_fork, on_exit) and each
worker (post_fork, post_worker_init, worker_exit).
"""
import ctypes
import math
import os
import shlex
import signal
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from base.config import Config  # noqa: E402
from runtime.shutdown import plan  # noqa: E402

_config = Config.from_env()

_launched = _config.engine_mode == "launched"
bind = _config.bind
# Launched by vllm serve with several workers, engine.relay owns the inherited engine sockets.
workers = _config.worker_count
worker_class = "gevent"
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
    cfg = Config.from_env().with_run_dir()
    os.environ["GREENFRONT_RUN_DIR"] = cfg.run_dir
    _metrics_dir(server, cfg)
    if cfg.engine_mode == "launched":
        server.log.info("launched by vllm serve: waiting for %d engine(s) on the inherited sockets",
                        cfg.engine_count)
        if cfg.relayed:
            _start_relay(server, cfg)
        return
    handshake = cfg.handshake_address
    if not handshake:
        if cfg.engine_mode == "external":
            raise SystemExit("GREENFRONT_ENGINE=external needs GREENFRONT_HANDSHAKE_ADDRESS "
                             "(e.g. tcp://0.0.0.0:13345) for the engines to connect to")
        handshake = f"ipc://{os.path.join(cfg.run_dir, 'handshake.sock')}"
    os.environ["GREENFRONT_HANDSHAKE_ADDRESS"] = handshake
    _config = Config.from_env()
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
    _preload_text(server, Config.from_env())


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


def _metrics_dir(server, cfg) -> None:
    """Every worker writes its metrics into one directory (prometheus-client's multiprocess
    mode), so a scrape answered by any worker reports the whole deployment. Set before any
    worker imports prometheus-client; ours is emptied at start (counts of a previous run would
    add up), a directory the user set is theirs to empty (vLLM says so too)."""
    path = cfg.metrics_dir
    if path:
        server.log.warning("PROMETHEUS_MULTIPROC_DIR=%s was set: it must be emptied between runs, "
                           "or the metrics count the old run too", path)
    else:
        path = os.path.join(cfg.run_dir, "prometheus")
        shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path, exist_ok=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = path


def pre_fork(server, worker):
    used = {getattr(w, "greenfront_slot", None) for w in server.WORKERS.values()}
    # Slots index the engines' INIT address lists, so they stay below the worker count.
    worker.greenfront_slot = next((s for s in range(_config.worker_count) if s not in used), 0)


def post_fork(server, worker):
    os.environ["GREENFRONT_WORKER_SLOT"] = str(worker.greenfront_slot)
    from runtime.accept import install

    install()


def post_worker_init(worker):
    drain = getattr(worker.wsgi, "drain", None)
    if drain is not None:
        _drain_on_sigterm(worker, drain)
    state = getattr(worker.wsgi, "state", None)
    if state is not None:
        state.start()
        state.wait_for_engines(worker.notify)


def _drain_on_sigterm(worker, drain) -> None:
    """gunicorn's SIGTERM handler stops the worker loop; the drain runs beside it (the loop
    waits graceful_timeout for the connections the drain ends)."""
    previous = signal.getsignal(signal.SIGTERM)

    def on_sigterm(signum, frame):
        drain.start_on_signal()
        if callable(previous):
            previous(signum, frame)
    signal.signal(signal.SIGTERM, on_sigterm)


def worker_exit(server, worker):
    state = getattr(getattr(worker, "wsgi", None), "state", None)
    if state is not None:
        state.stop()


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
    run_dir = os.environ.get("GREENFRONT_RUN_DIR", "")
    if run_dir and os.path.basename(run_dir).startswith("greenfront-"):
        shutil.rmtree(run_dir, ignore_errors=True)
