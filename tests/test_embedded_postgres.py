"""The embedded PostgreSQL + pgvector: what the whole project stands on."""

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings
from django.db import connection
from pgvector.django import CosineDistance

from facts.models import Fact
from tests.factories import make_fact

ROOT = Path(settings.BASE_DIR)
uses_embedded = settings.DATABASES["default"]["ENGINE"] == "memoryproject.embedded_postgres"


def unit(*values: float) -> list[float]:
    vector = np.zeros(settings.EMBEDDING_DIMENSIONS)
    vector[: len(values)] = values
    return list(vector / np.linalg.norm(vector))


@pytest.mark.django_db
def test_vector_extension_is_installed():
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        (pgvector_version,) = cursor.fetchone()
        cursor.execute("SHOW server_version_num")
        (server_version,) = cursor.fetchone()
    assert tuple(int(part) for part in pgvector_version.split(".")[:2]) >= (0, 8)
    if uses_embedded:
        assert int(server_version) // 10000 == 18


@pytest.mark.django_db
def test_fact_embedding_round_trips_and_cosine_distance_orders(tenant):
    far = make_fact(tenant=tenant, content="far", embedding=unit(0, 1))
    near = make_fact(tenant=tenant, content="near", embedding=unit(1, 0.1))
    middle = make_fact(tenant=tenant, content="middle", embedding=unit(1, 1))

    stored = Fact.objects.get(pk=near.pk)
    assert np.allclose(stored.embedding, unit(1, 0.1), atol=1e-6)

    ranked = list(
        Fact.objects.filter(tenant=tenant)
        .annotate(distance=CosineDistance("embedding", unit(1, 0)))
        .order_by("distance")
        .values_list("pk", flat=True)
    )
    assert ranked == [near.pk, middle.pk, far.pk]


def run_python(code: str, data_dir: Path) -> subprocess.Popen:
    env = {**os.environ, "EMBEDDED_PG_DATA_DIR": str(data_dir), "PYTHONPATH": str(ROOT)}
    env.pop("DATABASE_URL", None)
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


CONNECT = """
    import os, psycopg
    from memoryproject.embedded_postgres.server import DATABASE_NAME, SUPERUSER, ensure_running
    host = ensure_running(os.environ["EMBEDDED_PG_DATA_DIR"])
    conn = psycopg.connect(host=host, user=SUPERUSER, dbname=DATABASE_NAME, autocommit=True)
"""


def finish(process: subprocess.Popen) -> str:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return out


def server_running(data_dir: Path) -> bool:
    return (data_dir / "postmaster.pid").exists()


@pytest.mark.slow
def test_embedded_server_is_shared_keeps_its_data_and_stops_with_the_last_process(tmp_path):
    data_dir = tmp_path / "pgdata"

    # Given a first process that starts the server and writes a row, then exits
    finish(
        run_python(
            CONNECT
            + """
    conn.execute("CREATE TABLE notes (body text)")
    conn.execute("INSERT INTO notes VALUES ('kept across restarts')")
    """,
            data_dir,
        )
    )
    # then the server stopped with it
    assert not server_running(data_dir)

    # When two processes start at the same time and both hold the server for a while
    code = (
        CONNECT
        + """
    import time
    print(conn.execute("SELECT body FROM notes").fetchone()[0])
    time.sleep(1.5)
    """
    )
    both = [run_python(code, data_dir), run_python(code, data_dir)]
    outputs = [finish(process) for process in both]

    # Then both read the data written before the restart, and the server stopped after the last one
    assert [output.strip() for output in outputs] == ["kept across restarts"] * 2
    assert not server_running(data_dir)


@pytest.mark.slow
def test_the_servers_tuning_applies_random_page_cost_at_once_and_shared_buffers_from_the_next_start(
    tmp_path, monkeypatch
):
    data_dir = tmp_path / "pgdata"
    monkeypatch.setenv("EMBEDDED_PG_SHARED_BUFFERS", "160MB")
    monkeypatch.setenv("EMBEDDED_PG_RANDOM_PAGE_COST", "1.5")
    show = (
        CONNECT
        + """
    print(conn.execute("SELECT current_setting('shared_buffers'), current_setting('random_page_cost')").fetchone())
    """
    )

    first = finish(run_python(show, data_dir)).strip()
    second = finish(run_python(show, data_dir)).strip()

    # shared_buffers needs a restart: a new data folder starts on PostgreSQL's default, then on the setting
    assert (first, second) == ("('128MB', '1.5')", "('160MB', '1.5')")


@pytest.mark.parametrize(
    ("machine_gb", "cgroup_limits", "wanted"),
    [
        (24, [], "6144MB"),  # a quarter of the machine, beyond the 2 GB that kept a million chunks out
        (24, ["max", "9223372036854771712"], "6144MB"),  # cgroups that say "no limit" in their two ways
        (24, [str(4 * 2**30)], "1024MB"),  # a container's limit, not the machine's memory
        (0.25, [], "128MB"),  # never below PostgreSQL's own default
    ],
)
def test_shared_buffers_by_default_are_a_quarter_of_the_memory_the_server_may_use(
    tmp_path, monkeypatch, machine_gb, cgroup_limits, wanted
):
    from memoryproject.embedded_postgres import server

    monkeypatch.delenv("EMBEDDED_PG_SHARED_BUFFERS", raising=False)
    monkeypatch.setattr(server.psutil, "virtual_memory", lambda: type("Memory", (), {"total": int(machine_gb * 2**30)}))
    paths = []
    for n, limit in enumerate(cgroup_limits):
        paths.append(tmp_path / f"limit-{n}")
        paths[-1].write_text(f"{limit}\n")
    monkeypatch.setattr(server, "CGROUP_MEMORY_LIMITS", [*map(str, paths), str(tmp_path / "absent")])

    assert server.shared_buffers_wanted() == wanted


def manage(*args: str, data_dir: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "EMBEDDED_PG_DATA_DIR": data_dir, "DJANGO_SETTINGS_MODULE": "memoryproject.settings"}
    env.pop("DATABASE_URL", None)
    return subprocess.run(
        [sys.executable, "manage.py", *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_unusable_data_folder_is_one_clear_error_line(tmp_path):
    not_a_folder = tmp_path / "a-file"
    not_a_folder.write_text("")

    result = manage("migrate", data_dir=str(not_a_folder / "pgdata"))

    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: embedded PostgreSQL cannot use the data folder {not_a_folder / 'pgdata'}: Not a directory. "
        "Set EMBEDDED_PG_DATA_DIR to a writable folder, or DATABASE_URL to use another server."
    ]


@pytest.mark.slow
def test_server_that_fails_to_start_names_the_cause(tmp_path):
    broken = tmp_path / "pgdata"
    broken.mkdir()
    (broken / "PG_VERSION").write_text("18\n")  # looks initialised, but has no configuration

    result = manage("migrate", data_dir=str(broken))

    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"error: embedded PostgreSQL in {broken} failed to start:")
    assert "postgresql.conf" in line


@pytest.mark.slow
def test_sigterm_to_the_last_process_stops_the_server(tmp_path):
    data_dir = tmp_path / "pgdata"
    # Given a process (a management command, say) that joined the server and is busy
    process = run_python(
        CONNECT
        + """
    import time
    print("joined", flush=True)
    time.sleep(120)
    """,
        data_dir,
    )
    assert process.stdout.readline().strip() == "joined", process.stderr.read()
    assert server_running(data_dir)

    # When a process manager sends it SIGTERM
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=60)

    # Then it left through its exit hooks, and as the last user it stopped the server
    assert process.returncode == 128 + signal.SIGTERM
    assert not server_running(data_dir)
