"""A real Redis for the tests that need one: Debian's `redis-server`, started in a temporary folder on a unix
socket (no port to collide with), nothing saved to disk, stopped afterwards. Without the binary those tests skip,
saying so (.ci/run installs it)."""

import shutil
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

MISSING = "redis-server is not installed (apt-get install redis-server; .ci/run does): the Redis variant skips"


@contextmanager
def redis_server(folder: Path):
    """Yield the REDIS_URL of a fresh server."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip(MISSING)
    socket = folder / "redis.sock"
    process = subprocess.Popen(
        [binary, "--port", "0", "--unixsocket", str(socket), "--save", "", "--appendonly", "no", "--dir", str(folder)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 10
        while not socket.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"redis-server did not start (exit code {process.poll()})")
            time.sleep(0.05)
        yield f"unix://{socket}"
    finally:
        process.terminate()
        process.wait(timeout=10)
