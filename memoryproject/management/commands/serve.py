import contextlib
import os
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = (
        "Run the web server (gunicorn with gunicorn.conf.py, as in production: API + admin + static files) and the "
        "django-q cluster together; Ctrl-C or SIGTERM stops both (SIGTERM gracefully: requests and the task in hand "
        "finish). They share the embedded PostgreSQL, which stops when the last of them exits."
    )

    def add_arguments(self, parser):
        parser.add_argument("addrport", nargs="?", default=os.environ.get("MEMORYPROJECT_ADDR", "127.0.0.1:8000"))
        parser.add_argument("--no-worker", action="store_true", help="Do not start the django-q cluster.")

    def handle(self, *args, addrport: str, no_worker: bool, **options):
        manage = [sys.executable, str(settings.BASE_DIR / "manage.py")]
        web = [sys.executable, "-m", "gunicorn", "--chdir", str(settings.BASE_DIR), "--config", "gunicorn.conf.py"]
        commands = {"web": [*web, "--bind", addrport]}
        if not no_worker:
            commands["worker"] = [*manage, "qcluster"]
        # Handled explicitly: a shell may start us with SIGINT ignored, and SIGTERM should stop cleanly too
        # (set before starting children, which would inherit an ignored SIGINT).
        received = []
        signal.signal(signal.SIGINT, lambda signum, frame: _interrupt(signum, received))
        signal.signal(signal.SIGTERM, lambda signum, frame: _interrupt(signum, received))
        # Own sessions: Ctrl-C reaches only us, and we stop the children once, in order.
        # The web server's workers add up their metrics in one folder (the worker's process keeps its own, unused).
        metrics_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR") or str(settings.BASE_DIR / "var" / "prometheus")
        environments = {"web": {**os.environ, "PROMETHEUS_MULTIPROC_DIR": metrics_dir}, "worker": None}
        children = {
            name: subprocess.Popen(command, start_new_session=True, env=environments[name])
            for name, command in commands.items()
        }
        self.stdout.write(f"Serving on http://{addrport}/ (admin at /admin/); press Ctrl-C to stop.")
        exit_code = 0
        try:
            while True:
                for name, child in children.items():
                    if child.poll() is not None:
                        self.stderr.write(f"{name} exited with code {child.returncode}; stopping the rest.")
                        exit_code = child.returncode or 1
                        raise KeyboardInterrupt
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            # Each child's own bound: gunicorn's graceful timeout for its requests, the cluster's task timeout.
            bounds = {"web": int(os.environ.get("WEB_GRACEFUL_TIMEOUT", "30")), "worker": settings.Q_CLUSTER["timeout"]}
            _stop(children, bounds, received[0] if received else signal.SIGTERM)
            if settings.DATABASES["default"]["ENGINE"] == "memoryproject.embedded_postgres":
                # A child killed after its bound could not stop the shared server: stop it if nobody uses it.
                from memoryproject.embedded_postgres.server import stop_if_unused

                stop_if_unused(settings.EMBEDDED_PG_DATA_DIR)
        if exit_code:
            sys.exit(exit_code)


def _interrupt(signum, received: list) -> None:
    received.append(signum)
    raise KeyboardInterrupt


def _stop(children: dict[str, subprocess.Popen], bounds: dict[str, int], signum: int) -> None:
    """Pass the signal on (SIGINT: stop at once, SIGTERM: gracefully), wait for each child up to its bound (and a
    margin), then kill what is left of it: its whole process group, so no django-q process outlives it."""
    for child in children.values():
        if child.poll() is None:
            child.send_signal(signum)
    started = time.monotonic()
    for name, child in children.items():
        try:
            child.wait(timeout=max(0.1, started + bounds[name] + 10 - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait(timeout=10)
