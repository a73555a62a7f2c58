"""gunicorn's configuration, the same for `make run` (through `manage.py serve`) and production.

    gunicorn -c gunicorn.conf.py            # web; run `manage.py qcluster` beside it for the background tasks

Everything comes from the environment (docs/configuration.md, "Serving"). SIGHUP reloads gracefully: new workers
start (and load the embedding model) before the old ones finish their requests and exit; SIGTERM stops gracefully,
SIGINT at once.
"""

import os
import subprocess
import sys
from pathlib import Path

import environ

# Like the settings: a .env beside manage.py is read, for the WEB_* variables too (the environment wins).
if (Path(__file__).resolve().parent / ".env").is_file():
    environ.Env.read_env(Path(__file__).resolve().parent / ".env")

bind = [os.environ.get("WEB_BIND", "127.0.0.1:8000")]
# Two cores per host on our machines: one process per core, each with a few threads for requests that wait on
# the database while another embeds (bench/serving.py measured gthread against the ASGI worker and runserver).
workers = int(os.environ.get("WEB_WORKERS", "2"))
worker_class = os.environ.get("WEB_WORKER_CLASS", "gthread")
threads = int(os.environ.get("WEB_THREADS", "4"))  # gthread only
# The ASGI worker (uvicorn_worker.UvicornWorker) serves the ASGI application, the others the WSGI one.
wsgi_app = "memoryproject.asgi:application" if "uvicorn" in worker_class.lower() else "memoryproject.wsgi:application"
# A request still running after this many seconds is killed with its worker (a KB upload embeds the most).
timeout = int(os.environ.get("WEB_TIMEOUT", "120"))
graceful_timeout = int(os.environ.get("WEB_GRACEFUL_TIMEOUT", "30"))
keepalive = int(os.environ.get("WEB_KEEPALIVE", "5"))
# Behind a reverse proxy that sets X-Forwarded-Proto: the addresses it connects from (comma-separated).
forwarded_allow_ips = os.environ.get("WEB_FORWARDED_ALLOW_IPS", "127.0.0.1")
# No access log of gunicorn's own: a path holds user ids (an erased user's stayed in it). The app writes one line per
# request (the "access" logger), naming the route pattern, never the path.
accesslog = None
errorlog = "-"
loglevel = os.environ.get("LOG_LEVEL", "info").lower()
# gunicorn 24+'s control socket sits in ~/.gunicorn, one per user: several servers on one host would fight over it.
control_socket_disable = True
# The app is loaded in each worker, not the master, so SIGHUP picks up new code and settings.
preload_app = False


def on_starting(server):
    """Settings that cannot work (no secret key in production, a malformed DATABASE_URL) stop the master with their
    one line, instead of workers that fail one after the other. Read in a child process: the master itself keeps
    no settings, so that SIGHUP's new workers read them afresh."""
    done = subprocess.run([sys.executable, "-c", "import memoryproject.settings"], capture_output=True, text=True)
    if done.returncode:
        sys.exit(done.stderr.strip() or f"memoryproject: the settings failed to load (exit code {done.returncode})")


def when_ready(server):
    """Several workers write their metrics to PROMETHEUS_MULTIPROC_DIR: start each run with it empty (the files of
    a previous run's processes would be added up with this one's)."""
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        for stale in Path(folder).glob("*.db"):
            stale.unlink()


def child_exit(server, worker):
    """A worker that exits leaves its gauges' files behind: mark them dead, as prometheus_client asks."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)


def post_worker_init(worker):
    """Load the embedding model as the worker starts, not on its first request."""
    from memoryproject.serving import worker_warm_up

    worker_warm_up(worker.log)
