"""A bounded loopback load test of the production server, with embedding faults injected (issue 17, "Measured").

    .venv/bin/python bench/load.py [--scenario mixed|kb-isolation|episode-append|all] [--quick] [--both]
                                   [--agents 50] [--duration 60] [--embedding-failure-rate 0.0] [--think-ms 0]

Starts everything itself and stops it at the end (Ctrl-C included): a fake OpenAI-compatible embedding server
(tests/fake_openai.py, in a process of its own, failing each embedding request with a seeded probability) and
`manage.py serve` (gunicorn gthread + the django-q worker, gunicorn.conf.py's defaults) on free loopback ports,
after `migrate` and `setup_schedules`, on an embedded PostgreSQL under var/bench/load/ (or DATABASE_URL when set).
Every run works in tenants of its own (made through tenancy.services in this process); throttles are set far
above what the agents send, so the figures are the service's, not the throttle's.

Scenarios
  mixed           --agents threads (one HTTP session each) for --duration seconds, closed loop (--think-ms
                  between requests): 60% POST /context, 20% POST /facts, 15% POST /episodes (the next turns of
                  the agent's session), 5% POST /kb/documents (2-40 KB of Markdown). Then, after the worker's queue
                  drains (bounded by --drain-timeout), a count check: every acknowledged (2xx) write is stored —
                  facts by the marker in their text (or, when merged, the fact they merged into), episodes' messages
                  by marker, KB documents by doc_id with their chunks; writes that failed are looked up too
                  ("kept, answered an error"). --both runs it at failure rate 0 and then 0.5.
  all             mixed, kb-isolation, episode-append on one server; with --both the faulty mixed run comes last.
  kb-isolation    other tenants' /context latency while idle, then during one --kb-upload-mb (3) MB upload of
                  generated prose, until it is indexed; the p95 ratio (target under 2x).
  episode-append  one session of --turns (500) turns posted one turn at a time; mean ms of the first 50 posts
                  vs the last 50 (target within 1.5x), then the count check of its messages.
--quick shrinks everything (10 agents x 15 s, a 1 MB upload, 300 turns): one to two minutes a scenario.

The server gets this process's environment under the settings above, so serving settings can be compared:
`DATABASE_CONN_MAX_AGE=0 bench/load.py --quick` (a new PostgreSQL backend per request costs about as much CPU as
the request itself), `WEB_WORKERS=3`, `--embedder local` (the bundled model instead of the fake, no faults).

Prints a table per run (route, count, p50/p95/p99 ms, errors) and writes the figures to var/bench/load-*.json.
Asserts nothing; the exit code is 0 even when writes were lost (the table says so).
Texts are LoCoMo turns (../shared/data/locomo/locomo_dev.json) when present, else generated sentences.
"""

import argparse
import contextlib
import json
import math
import os
import random
import re
import signal
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import _server
import requests

ROOT = Path(__file__).resolve().parent.parent
VAR = ROOT / "var" / "bench"
LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
LOCOMO_FALLBACK = Path("/work/shared/data/locomo/locomo_dev.json")
MIX = {"context": 60, "facts": 20, "episodes": 15, "kb": 5}
ROUTES = {
    "context": "/api/v1/context",
    "facts": "/api/v1/facts",
    "episodes": "/api/v1/episodes",
    "kb": "/api/v1/kb/documents",
}
USERS_PER_TENANT = 5
AGENTS_PER_TENANT = 5
SEED_FACTS_PER_USER = 30
REQUEST_TIMEOUT = (5, 180)  # connect, read: longer than gunicorn's 120 s, so its timeout shows as its own error

# --- texts -----------------------------------------------------------------------------------------------------


@dataclass
class Turn:
    speaker: str
    text: str


def load_turns() -> list[list[Turn]]:
    """LoCoMo's sessions as lists of turns, or generated ones when the data set is not on this machine."""
    path = LOCOMO if LOCOMO.is_file() else LOCOMO_FALLBACK
    if path.is_file():
        sessions = []
        for sample in json.loads(path.read_text()):
            conversation = sample["conversation"]
            for key, value in conversation.items():
                if re.fullmatch(r"session_\d+", key) and value:
                    sessions.append([Turn(turn["speaker"], turn["text"]) for turn in value if turn.get("text")])
        return sessions
    rng = random.Random(3)
    subjects = ["I", "My sister", "Our team", "The landlord", "My manager", "We"]
    verbs = ["moved", "started", "finished", "booked", "cancelled", "switched", "adopted", "painted"]
    objects = ["the kitchen", "a pottery class", "the Lisbon trip", "PostgreSQL", "a rescue dog", "night shifts"]
    times = ["last week", "yesterday", "in March", "after the wedding", "this morning", "two years ago"]
    return [
        [
            Turn(
                ("Ana", "Ben")[n % 2],
                f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)} {rng.choice(times)}.",
            )
            for n in range(30)
        ]
        for _ in range(60)
    ]


class Texts:
    def __init__(self, seed: int):
        self.sessions = load_turns()
        self.turns = [turn for session in self.sessions for turn in session]
        self.rng = random.Random(seed)

    def query(self, rng: random.Random) -> str:
        # Two turns: an agent asks with the user's latest message, which is nearly always new text.
        first, second = rng.choice(self.turns), rng.choice(self.turns)
        return f"{first.text} {second.text}"[:1500]

    def fact(self, rng: random.Random) -> str:
        turn = rng.choice(self.turns)
        return f"{turn.speaker} said: {turn.text}"[:1500]

    def document(self, rng: random.Random, *, size_bytes: int, title: str, marker: str) -> str:
        """Markdown of real-looking prose: sections of paragraphs made of turns in shuffled order, with headings."""
        parts = [f"# {title}\n\nReference {marker}. Notes collected from conversations.\n"]
        size, section = len(parts[0]), 0
        while size < size_bytes:
            section += 1
            session = rng.choice(self.sessions)
            heading = (
                f"\n## {section}. {session[0].speaker} and {session[-1].speaker}: {rng.choice(session).text[:60]}\n"
            )
            paragraphs = []
            for _ in range(rng.randint(3, 7)):
                turns = rng.sample(session, k=min(len(session), rng.randint(3, 6)))
                paragraphs.append(" ".join(f"{turn.speaker} said that {turn.text}" for turn in turns))
            block = heading + "\n" + "\n\n".join(paragraphs) + f"\n\n(section {section}, {marker})\n"
            parts.append(block)
            size += len(block.encode())
        return "".join(parts)


# --- markers --------------------------------------------------------------------------------------------------


class Markers:
    """Unique words put in every written text, so the count check can find each write (one token for search)."""

    def __init__(self, run_id: str):
        self.prefix = f"lm{run_id}"
        self.pattern = re.compile(rf"\b{self.prefix}[0-9a-z]+\b")
        self._count = 0
        self._lock = threading.Lock()

    def new(self, agent: int) -> str:
        with self._lock:
            self._count += 1
            return f"{self.prefix}a{agent:03d}n{self._count:06d}"

    def find(self, text: str) -> set[str]:
        return set(self.pattern.findall(text or ""))


# --- recording ------------------------------------------------------------------------------------------------


@dataclass
class Sample:
    route: str
    status: int  # 0: no HTTP answer (timeout, connection refused or reset)
    ms: float
    started: float
    degraded: bool = False
    error: str = ""


@dataclass
class Write:
    kind: str  # facts | episodes | kb
    tenant: int
    user_id: str
    markers: list[str]
    status: int
    session_id: str = ""
    doc_id: str = ""
    outcome: str = ""
    object_id: int | None = None
    error: str = ""
    kept: bool = False  # failed, yet found stored by the count check
    pending: bool = False  # a fact acknowledged before its embedding (issue 17: stored while the provider fails)

    @property
    def acknowledged(self) -> bool:
        return 200 <= self.status < 300


@dataclass
class Recorder:
    samples: list[Sample] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, sample: Sample, write: Write | None = None) -> None:
        with self.lock:
            self.samples.append(sample)
            if write is not None:
                self.writes.append(write)


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile; nan for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def error_text(response: requests.Response) -> str:
    try:
        error = response.json().get("error") or {}
        return f"{error.get('code', '')}: {str(error.get('message', ''))[:160]}"
    except ValueError:
        return response.text[:160].replace("\n", " ")


# --- the API client -------------------------------------------------------------------------------------------


@dataclass
class Tenant:
    index: int
    id: int
    name: str
    key: str
    users: list[str]


class Client:
    """One agent's HTTP session (keep-alive), timing each request into the recorder."""

    def __init__(self, base_url: str, recorder: Recorder):
        self.base_url = base_url
        self.recorder = recorder
        self.session = requests.Session()

    def call(self, route: str, tenant: Tenant, method: str = "POST", path: str | None = None, **kwargs):
        """(status, body or None); every call is one sample, timed from send to the last byte of the answer."""
        headers = {"Authorization": f"Bearer {tenant.key}"}
        started = time.perf_counter()
        wall = time.monotonic()
        try:
            response = self.session.request(
                method, self.base_url + (path or ROUTES[route]), headers=headers, timeout=REQUEST_TIMEOUT, **kwargs
            )
            status, body, error = response.status_code, None, ""
            with contextlib.suppress(ValueError):
                body = response.json()
            if not 200 <= status < 300:
                error = error_text(response)
        except requests.RequestException as exc:
            status, body, error = 0, None, f"{type(exc).__name__}: {str(exc)[:160]}"
        ms = (time.perf_counter() - started) * 1000
        degraded = bool(isinstance(body, dict) and body.get("degraded"))
        return Sample(route, status, ms, wall, degraded, error), body

    def get(self, tenant: Tenant, path: str, **params) -> tuple[int, dict | None]:
        """An untimed read, for the count check."""
        response = self.session.get(
            self.base_url + path, headers={"Authorization": f"Bearer {tenant.key}"}, params=params, timeout=60
        )
        with contextlib.suppress(ValueError):
            return response.status_code, response.json()
        return response.status_code, None

    def close(self) -> None:
        self.session.close()


# --- the agents -----------------------------------------------------------------------------------------------


class Agent:
    """One simulated agent: a tenant, its end users, an episode session per user that grows a turn pair per post."""

    def __init__(self, *, number: int, tenant: Tenant, client: Client, texts: Texts, markers: Markers, seed: int):
        self.number = number
        self.tenant = tenant
        self.client = client
        self.texts = texts
        self.markers = markers
        self.rng = random.Random(seed)
        self.sessions: dict[str, tuple[str, list[Turn], int]] = {}  # user -> (session id, its turns, next turn)
        self.kb_count = 0

    def step(self, op: str) -> None:
        user = self.rng.choice(self.tenant.users)
        getattr(self, f"op_{op}")(user)

    def op_context(self, user: str) -> None:
        payload = {"user_id": user, "query": self.texts.query(self.rng)}
        sample, _ = self.client.call("context", self.tenant, json=payload)
        self.client.recorder.add(sample)

    def op_facts(self, user: str) -> None:
        marker = self.markers.new(self.number)
        category = self.rng.choice(["preference", "profile", "project", "decision", "other"])
        payload = {"user_id": user, "content": f"{self.texts.fact(self.rng)} (ref {marker})", "category": category}
        sample, body = self.client.call("facts", self.tenant, json=payload)
        write = Write("facts", self.tenant.index, user, [marker], sample.status, error=sample.error)
        if sample.status in (200, 201) and isinstance(body, dict):
            write.outcome = body.get("outcome", "")
            write.object_id = (body.get("fact") or {}).get("id")
            write.pending = (body.get("fact") or {}).get("embedding") == "pending"
        self.client.recorder.add(sample, write)

    def op_episodes(self, user: str) -> None:
        session_id, turns, position = self.sessions.get(user) or self._new_session(user)
        if position + 2 > len(turns) or position >= 40:
            session_id, turns, position = self._new_session(user)
        messages, markers = [], []
        for offset, role in enumerate(("user", "assistant")):
            marker = self.markers.new(self.number)
            turn = turns[position + offset]
            messages.append({"role": role, "content": f"{turn.speaker}: {turn.text} ({marker})"})
            markers.append(marker)
        self.sessions[user] = (session_id, turns, position + 2)
        sample, body = self.client.call(
            "episodes", self.tenant, json={"user_id": user, "session_id": session_id, "messages": messages}
        )
        write = Write("episodes", self.tenant.index, user, markers, sample.status, session_id=session_id)
        write.error = sample.error
        if 200 <= sample.status < 300:
            write.object_id = (body or {}).get("id")
        self.client.recorder.add(sample, write)

    def _new_session(self, user: str) -> tuple[str, list[Turn], int]:
        turns = self.rng.choice([session for session in self.texts.sessions if len(session) >= 4])
        session = (f"s-{self.number}-{uuid.uuid4().hex[:8]}", turns, 0)
        self.sessions[user] = session
        return session

    def op_kb(self, user: str) -> None:
        self.kb_count += 1
        marker = self.markers.new(self.number)
        doc_id = f"load/agent-{self.number}/{marker}.md"
        size = int(self.rng.uniform(2, 40) * 1024)
        text = self.texts.document(self.rng, size_bytes=size, title=f"Notes {self.kb_count}", marker=marker)
        payload = {"doc_id": doc_id, "text": text, "title": f"Notes {marker}", "content_type": "markdown"}
        sample, body = self.client.call("kb", self.tenant, json=payload)
        write = Write("kb", self.tenant.index, "", [marker], sample.status, doc_id=doc_id, error=sample.error)
        if isinstance(body, dict) and 200 <= sample.status < 300:
            write.outcome = str(body.get("outcome") or body.get("status") or "")
        self.client.recorder.add(sample, write)


def run_agents(
    agents: list[Agent],
    *,
    duration: float,
    think_ms: float,
    max_requests: int,
    stop: threading.Event,
    server: _server.ProductionServer,
) -> float:
    """Every agent in its own thread, closed loop, until the duration, the request budget or Ctrl-C (or the server
    exiting); the seconds it took."""
    ops, weights = list(MIX), list(MIX.values())
    budget = {"left": max_requests}
    budget_lock = threading.Lock()
    deadline = time.monotonic() + duration

    def loop(agent: Agent) -> None:
        while not stop.is_set() and time.monotonic() < deadline:
            with budget_lock:
                if budget["left"] <= 0:
                    return
                budget["left"] -= 1
            try:
                agent.step(agent.rng.choices(ops, weights)[0])
            except Exception as exc:  # noqa: BLE001 - a bench bug must not hide the other agents' figures
                print(f"agent {agent.number}: {type(exc).__name__}: {exc}", file=sys.stderr)
            if think_ms:
                stop.wait(agent.rng.expovariate(1000.0 / think_ms))

    threads = [threading.Thread(target=loop, args=(agent,), daemon=True) for agent in agents]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(timeout=0.5)
            server.check_alive()
    return time.monotonic() - started


# --- the environment ------------------------------------------------------------------------------------------


def server_environment(args, fake_base_url: str) -> dict[str, str]:
    data = VAR / "load"
    for folder in ("static", "prometheus"):
        (data / folder).mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "memoryproject.settings",
        "DJANGO_ENV": "development",
        "EMBEDDING_PROVIDER": "openai",
        "OPENAI_BASE_URL": fake_base_url,
        "OPENAI_API_KEY": "sk-test-fake",  # tests.fake_openai.API_KEY
        "EMBEDDING_MODEL": "text-embedding-3-small",  # the fake answers any model name with its hash vectors
        "EMBEDDING_DIMENSIONS": "384",
        "OPENAI_MAX_RETRIES": str(args.openai_max_retries),
        "OPENAI_TIMEOUT": str(args.openai_timeout),
        "CHAT_PROVIDER": "none",
        # Far above what the agents send: the load test measures the service, not the throttle (still counted).
        "API_THROTTLE_RATE": "10000000/min",
        "API_THROTTLE_BURST": "10000000/10s",
        "LOG_LEVEL": os.environ.get("LOG_LEVEL", "WARNING"),
        "DJANGO_STATIC_ROOT": str(data / "static"),
        "PROMETHEUS_MULTIPROC_DIR": str(data / "prometheus"),
    }
    if args.embedder == "local":  # the bundled MiniLM in every web and worker process: CPU-bound, no faults
        env["EMBEDDING_PROVIDER"] = "local"
    if not os.environ.get("DATABASE_URL"):
        env["EMBEDDED_PG_DATA_DIR"] = str(data / "pgdata")
    return env


def django_setup(env: dict[str, str]) -> None:
    """This process reads and writes the same database (tenants, the count check) with the server's settings."""
    os.environ.update({name: value for name, value in env.items() if name != "PROMETHEUS_MULTIPROC_DIR"})
    import _django  # noqa: F401


def tenants_create(count: int, run_id: str, label: str) -> list[Tenant]:
    from tenancy.services import tenant_create

    made = []
    for index in range(count):
        tenant, issued = tenant_create(name=f"load-{run_id}-{label}-{index}")
        users = [f"user-{index}-{n}" for n in range(USERS_PER_TENANT)]
        made.append(Tenant(index, tenant.pk, tenant.name, issued.key, users))
    return made


def tenants_seed(client: Client, tenants: list[Tenant], texts: Texts, rng: random.Random) -> None:
    """A few facts per user and two small documents per tenant, so /context has something to rank from the start."""
    for tenant in tenants:
        facts = [
            {"user_id": user, "content": texts.fact(rng), "category": "other"}
            for user in tenant.users
            for _ in range(SEED_FACTS_PER_USER)
        ]
        sample, _ = client.call("facts", tenant, path="/api/v1/facts/import", json={"facts": facts})
        if sample.status != 201:
            raise SystemExit(f"seeding facts failed: {sample.status} {sample.error}")
        for number in range(2):
            text = texts.document(rng, size_bytes=4000, title=f"Handbook {number}", marker=f"seed{number}")
            payload = {"doc_id": f"seed/handbook-{number}.md", "text": text, "content_type": "markdown"}
            sample, _ = client.call("kb", tenant, json=payload)
            if not 200 <= sample.status < 300:
                raise SystemExit(f"seeding documents failed: {sample.status} {sample.error}")


# --- the queue and the count check ----------------------------------------------------------------------------


def queued_functions() -> dict[str, int]:
    """The tasks still queued, by function (the ORM broker only), for a queue that did not drain."""
    from django_q.conf import Conf
    from django_q.models import OrmQ

    if not Conf.ORM:
        return {}
    return {str(func): count for func, count in Counter(row.func() for row in OrmQ.objects.all()[:500]).items()}


def backlog(tenant_ids: list[int]) -> dict[str, int]:
    """What the worker still has to do: queued tasks, episodes waiting for extraction, documents being indexed, facts
    stored without their vector (while the provider failed)."""
    from django.db import close_old_connections
    from django_q.brokers import get_broker
    from django_q.conf import Conf

    from episodes.models import Episode
    from facts.models import Fact
    from kb.models import Document

    close_old_connections()
    if Conf.ORM:
        from django_q.models import OrmQ

        queued = OrmQ.objects.count()  # a task in hand keeps its row until it is acknowledged
    else:
        queued = get_broker().queue_size()
    episodes = Episode.objects.filter(tenant_id__in=tenant_ids, extraction_status__in=["pending", "running"]).count()
    field_names = {f.name for f in Document._meta.get_fields()}
    documents = 0
    if "status" in field_names:  # KB uploads indexed by the worker (issue 17) carry a status
        documents = Document.objects.filter(tenant_id__in=tenant_ids).exclude(status__in=["ready", "failed"]).count()
    facts = Fact.objects.filter(tenant_id__in=tenant_ids, embedding__isnull=True).count()
    return {
        "queued_tasks": queued,
        "episodes_extracting": episodes,
        "documents_indexing": documents,
        "facts_awaiting_vector": facts,
    }


def drain(tenant_ids: list[int], timeout: float, server: _server.ProductionServer) -> tuple[float, dict[str, int]]:
    started = time.monotonic()
    while True:
        server.check_alive()
        left = backlog(tenant_ids)
        if not any(left.values()):
            return time.monotonic() - started, left
        if time.monotonic() - started > timeout:
            return time.monotonic() - started, {**left, "queued_by_function": queued_functions()}
        time.sleep(1.0)


def count_check(writes: list[Write], tenants: list[Tenant], client: Client, markers: Markers) -> dict:
    """Acknowledged / stored / lost per kind; writes that failed but were stored anyway ("kept")."""
    from django.db import close_old_connections
    from django.db.models import Count

    from facts.models import Fact, FactEvent
    from kb.models import Document

    close_old_connections()
    ids = [tenant.id for tenant in tenants]
    result: dict[str, dict] = {}

    # Facts: by the marker in a stored fact's text, or in the event of a merge into an older fact (which keeps the
    # older text and records the merged one), the check for a write merged at once or later (after its embedding).
    stored_markers: set[str] = set()
    fact_ids = set()
    for fact_id, content in Fact.objects.filter(tenant_id__in=ids).values_list("id", "content").iterator():
        fact_ids.add(fact_id)
        stored_markers |= markers.find(content)
    merged_markers: set[str] = set()
    merges = FactEvent.objects.filter(tenant_id__in=ids, action=FactEvent.Action.MERGED)
    for after in merges.values_list("after", flat=True).iterator():
        merged_markers |= markers.find(str((after or {}).get("merged", "")))
    without_vector = Fact.objects.filter(tenant_id__in=ids, embedding__isnull=True).count()
    facts = [write for write in writes if write.kind == "facts"]
    acked = [write for write in facts if write.acknowledged]

    def fact_stored(write: Write) -> bool:
        marker = write.markers[0]
        merged_at_once = write.outcome == "merged" and write.object_id in fact_ids
        return marker in stored_markers or marker in merged_markers or merged_at_once

    lost = [write for write in acked if not fact_stored(write)]
    merged = [w for w in acked if w.markers[0] not in stored_markers and fact_stored(w)]
    kept = [write for write in facts if not write.acknowledged and fact_stored(write)]
    for write in kept:
        write.kept = True
    result["facts"] = {
        "acknowledged": len(acked),
        "stored": len(acked) - len(lost),
        "merged_into_existing": len(merged),
        "acknowledged_awaiting_vector": sum(write.pending for write in acked),
        "lost": len(lost),
        "failed": len(facts) - len(acked),
        "kept_despite_error": len(kept),
        "stored_without_vector_after_drain": without_vector,
        "lost_examples": [w.markers[0] for w in lost[:5]],
    }

    # Episodes: every acknowledged message, by marker, in the episode read back through the API.
    episodes = [write for write in writes if write.kind == "episodes"]
    by_session: dict[tuple[int, str, str], list[Write]] = defaultdict(list)
    for write in episodes:
        by_session[(write.tenant, write.user_id, write.session_id)].append(write)
    messages_acked = messages_stored = messages_kept = messages_failed = 0
    statuses: Counter = Counter()
    lost_examples = []
    for (tenant_index, user_id, session_id), session_writes in by_session.items():
        tenant = tenants[tenant_index]
        status, page = client.get(tenant, "/api/v1/episodes", user_id=user_id, session_id=session_id)
        found: set[str] = set()
        for item in (page or {}).get("results", []) if status == 200 else []:
            detail_status, detail = client.get(tenant, f"/api/v1/episodes/{item['id']}")
            if detail_status == 200:
                statuses[detail.get("extraction_status")] += 1
                for message in detail.get("messages", []):
                    found |= markers.find(message.get("content", ""))
        for write in session_writes:
            if write.acknowledged:
                messages_acked += len(write.markers)
                stored = [marker for marker in write.markers if marker in found]
                messages_stored += len(stored)
                if len(stored) < len(write.markers) and len(lost_examples) < 5:
                    lost_examples.append(session_id)
            else:
                messages_failed += len(write.markers)
                messages_kept += sum(marker in found for marker in write.markers)
                write.kept = any(marker in found for marker in write.markers)
    result["episode_messages"] = {
        "acknowledged": messages_acked,
        "stored": messages_stored,
        "lost": messages_acked - messages_stored,
        "failed": messages_failed,
        "kept_despite_error": messages_kept,
        "posts_acknowledged": sum(w.acknowledged for w in episodes),
        "sessions": len(by_session),
        "extraction_status": dict(statuses),
        "lost_examples": sorted(set(lost_examples)),
    }

    # KB documents: by doc_id, with their chunks (a document without chunks is stored but not searchable).
    field_names = {f.name for f in Document._meta.get_fields()}
    columns = ["doc_id", "chunk_total"] + (["status"] if "status" in field_names else [])
    documents = {
        row["doc_id"]: row
        for row in Document.objects.filter(tenant_id__in=ids)
        .annotate(chunk_total=Count("chunks"))
        .values(*columns)
        .iterator()
    }
    kb = [write for write in writes if write.kind == "kb"]
    kb_acked = [write for write in kb if write.acknowledged]
    kb_lost = [write for write in kb_acked if write.doc_id not in documents]
    for write in kb:
        write.kept = not write.acknowledged and write.doc_id in documents
    unindexed = [
        w
        for w in kb_acked
        if w.doc_id in documents
        and (documents[w.doc_id]["chunk_total"] == 0 or documents[w.doc_id].get("status", "ready") != "ready")
    ]
    result["kb_documents"] = {
        "acknowledged": len(kb_acked),
        "stored": len(kb_acked) - len(kb_lost),
        "lost": len(kb_lost),
        "stored_not_indexed_after_drain": len(unindexed),
        "failed": len(kb) - len(kb_acked),
        "kept_despite_error": sum(write.kept for write in kb),
        "status": dict(Counter(str(documents[w.doc_id].get("status", "-")) for w in kb_acked if w.doc_id in documents)),
        "lost_examples": [w.doc_id for w in kb_lost[:5]],
    }
    return result


def self_check_sabotage(client: Client, tenants: list[Tenant], writes: list[Write]) -> None:
    """--self-check: erase one end user (their facts and episodes) and delete one acknowledged KB document through
    the API before the count check, which must then report exactly those writes as lost."""
    from kb.models import Document

    acked = [w for w in writes if w.acknowledged and w.kind in ("facts", "episodes")]
    if acked:
        tenant, user = tenants[acked[0].tenant], acked[0].user_id
        mine = [w for w in acked if w.tenant == acked[0].tenant and w.user_id == user]
        response = client.session.delete(
            f"{client.base_url}/api/v1/users/{user}", headers={"Authorization": f"Bearer {tenant.key}"}, timeout=60
        )
        facts = sum(w.kind == "facts" for w in mine)  # merged ones too: erasure takes the merge events with it
        messages = sum(len(w.markers) for w in mine if w.kind == "episodes")
        print(
            f"self-check: erased {user} of {tenant.name} (HTTP {response.status_code}): expect {facts} facts and "
            f"{messages} episode messages lost"
        )
    documents = [w for w in writes if w.acknowledged and w.kind == "kb"]
    if documents:
        tenant = tenants[documents[0].tenant]
        document = Document.objects.filter(tenant_id=tenant.id, doc_id=documents[0].doc_id).first()
        if document is not None:
            response = client.session.delete(
                f"{client.base_url}/api/v1/kb/documents/{document.pk}",
                headers={"Authorization": f"Bearer {tenant.key}"},
                timeout=60,
            )
            print(f"self-check: deleted KB document {documents[0].doc_id} ({response.status_code}): expect 1 lost")


# --- reporting ------------------------------------------------------------------------------------------------


def route_table(samples: list[Sample], elapsed: float) -> list[dict]:
    rows = []
    for route in [*ROUTES, "other"]:
        mine = [s for s in samples if (s.route if s.route in ROUTES else "other") == route]
        if not mine:
            continue
        ms = [s.ms for s in mine]
        errors = [s for s in mine if not 200 <= s.status < 300]
        rows.append(
            {
                "route": f"POST {ROUTES.get(route, route)}",
                "count": len(mine),
                "per_s": len(mine) / elapsed if elapsed else 0.0,
                "p50": percentile(ms, 0.50),
                "p95": percentile(ms, 0.95),
                "p99": percentile(ms, 0.99),
                "max": max(ms),
                "errors": len(errors),
                "degraded": sum(s.degraded for s in mine),
            }
        )
    return rows


def print_route_table(rows: list[dict], elapsed: float) -> None:
    print(
        f"{'route':<26} {'count':>6} {'req/s':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>8} "
        f"{'errors':>6} {'degraded':>8}"
    )
    for row in rows:
        print(
            f"{row['route']:<26} {row['count']:>6} {row['per_s']:>7.1f} {row['p50']:>8.1f} {row['p95']:>8.1f} "
            f"{row['p99']:>8.1f} {row['max']:>8.1f} {row['errors']:>6} {row['degraded']:>8}"
        )
    total = sum(row["count"] for row in rows)
    print(f"{'all':<26} {total:>6} {total / elapsed if elapsed else 0:>7.1f}   ({elapsed:.1f} s)")


def errors_by_status(samples: list[Sample], writes: list[Write]) -> list[dict]:
    """Failed requests by route and status, with one message and how many of those writes were stored anyway (run
    after the count check, which marks them)."""
    counts: Counter = Counter((s.route, s.status) for s in samples if not 200 <= s.status < 300)
    kept: Counter = Counter((w.kind, w.status) for w in writes if w.kept)
    examples = {}
    for sample in samples:
        if not 200 <= sample.status < 300:
            examples.setdefault((sample.route, sample.status), sample.error)
    return [
        {
            "route": route,
            "status": status,
            "count": count,
            "write_kept": kept[(route, status)],
            "example": examples[(route, status)],
        }
        for (route, status), count in sorted(counts.items())
    ]


def print_check(check: dict, errors: list[dict], backlog_left: dict, drained_in: float) -> None:
    drained = "drained" if not any(backlog_left.values()) else f"NOT drained: {backlog_left}"
    print(f"worker queue {drained} after {drained_in:.1f} s")
    print(f"{'kind':<16} {'acked':>7} {'stored':>7} {'lost':>5} {'failed':>7} {'kept despite error':>19}  notes")
    for kind, row in check.items():
        notes = {
            key: value
            for key, value in row.items()
            if key not in {"acknowledged", "stored", "lost", "failed", "kept_despite_error"} and value not in ({}, [])
        }
        print(
            f"{kind:<16} {row['acknowledged']:>7} {row['stored']:>7} {row['lost']:>5} {row['failed']:>7} "
            f"{row['kept_despite_error']:>19}  {notes if notes else ''}"
        )
    if errors:
        print("errors by route and status (a 503 whose write was stored anyway is still an error):")
        for row in errors:
            kept = f"write kept in {row['write_kept']}" if row["route"] != "context" else "read"
            print(f"  {row['route']:<9} {row['status']:>3}  x{row['count']:<5} {kept:<19} {row['example']}")
    else:
        print("no errors")


def save(name: str, figures: dict) -> Path:
    VAR.mkdir(parents=True, exist_ok=True)
    path = VAR / f"load-{name}-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json"
    path.write_text(json.dumps(figures, indent=2, default=str))
    return path


# --- scenarios ------------------------------------------------------------------------------------------------


@dataclass
class Context:
    args: argparse.Namespace
    server: _server.ProductionServer
    fake: _server.FakeEmbeddingServer
    texts: Texts
    run_id: str
    stop: threading.Event


def cpu_now(ctx: Context) -> dict[str, float]:
    return {
        **ctx.server.cpu(),
        "fake_embeddings": _server.cpu_seconds(ctx.fake.process.pid),
        "bench": sum(os.times()[:2]),
    }


def scenario_mixed(ctx: Context, failure_rate: float) -> dict:
    args = ctx.args
    label = f"mixed{int(failure_rate * 100)}"
    tenant_count = max(1, math.ceil(args.agents / AGENTS_PER_TENANT))
    tenants = tenants_create(tenant_count, ctx.run_id, label)
    seeder = Client(ctx.server.base_url, Recorder())
    ctx.fake.set_failure_rate(0.0)
    tenants_seed(seeder, tenants, ctx.texts, random.Random(args.seed))
    drain([t.id for t in tenants], args.drain_timeout, ctx.server)
    markers = Markers(f"{ctx.run_id}{label}")
    recorder = Recorder()
    agents = [
        Agent(
            number=n,
            tenant=tenants[n % tenant_count],
            client=Client(ctx.server.base_url, recorder),
            texts=ctx.texts,
            markers=markers,
            seed=args.seed * 1000 + n,
        )
        for n in range(args.agents)
    ]
    print(
        f"\n== mixed: {args.agents} agents x {args.duration:g} s, {tenant_count} tenants x {USERS_PER_TENANT} users, "
        f"embedding failure rate {failure_rate:g}, think {args.think_ms:g} ms",
        flush=True,
    )
    before = ctx.fake.control()
    cpu_before = cpu_now(ctx)
    ctx.fake.set_failure_rate(failure_rate, seed=args.seed)
    elapsed = run_agents(
        agents,
        duration=args.duration,
        think_ms=args.think_ms,
        max_requests=args.max_requests,
        stop=ctx.stop,
        server=ctx.server,
    )
    cpu = {name: round(value - cpu_before[name], 1) for name, value in cpu_now(ctx).items()}
    ctx.fake.set_failure_rate(0.0)  # the drain and the count check run with a healthy provider, as after an outage
    after = ctx.fake.control()
    drained_in, left = drain([t.id for t in tenants], args.drain_timeout, ctx.server)
    if args.self_check:
        self_check_sabotage(seeder, tenants, recorder.writes)
    check = count_check(recorder.writes, tenants, seeder, markers)
    for agent in agents:
        agent.client.close()
    rows = route_table(recorder.samples, elapsed)
    errors = errors_by_status(recorder.samples, recorder.writes)
    print_route_table(rows, elapsed)
    embedding = {
        "requests": after["embedding_requests"] - before["embedding_requests"],
        "failed": after["embedding_failures"] - before["embedding_failures"],
    }
    print(f"fake embedding server during the run: {embedding['requests']} requests, {embedding['failed']} failed")
    print(
        f"CPU seconds during the run ({elapsed:.0f} s on {os.cpu_count()} cores, load average "
        f"{os.getloadavg()[0]:.1f}): {cpu}; the rest of the cores went to other work on the machine"
    )
    print_check(check, errors, left, drained_in)
    return {
        "scenario": "mixed",
        "failure_rate": failure_rate,
        "agents": args.agents,
        "duration_s": args.duration,
        "elapsed_s": elapsed,
        "think_ms": args.think_ms,
        "routes": rows,
        "errors": errors,
        "count_check": check,
        "drain": {"seconds": drained_in, "left": left},
        "embedding_server": embedding,
        "cpu_seconds": cpu,
        "load_average": os.getloadavg()[0],
    }


def context_load(
    ctx: Context, tenants: list[Tenant], threads: int, until: threading.Event, max_seconds: float
) -> list[Sample]:
    recorder = Recorder()
    deadline = time.monotonic() + max_seconds

    def loop(number: int) -> None:
        client = Client(ctx.server.base_url, recorder)
        rng = random.Random(ctx.args.seed + number)
        while not until.is_set() and not ctx.stop.is_set() and time.monotonic() < deadline:
            tenant = tenants[number % len(tenants)]
            payload = {"user_id": rng.choice(tenant.users), "query": ctx.texts.query(rng)}
            sample, _ = client.call("context", tenant, json=payload)
            recorder.add(sample)
            if ctx.args.think_ms:
                until.wait(rng.expovariate(1000.0 / ctx.args.think_ms))
        client.close()

    workers = [threading.Thread(target=loop, args=(n,), daemon=True) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        while worker.is_alive():
            worker.join(timeout=0.5)
    return recorder.samples


def document_indexed(tenant_id: int, doc_id: str) -> dict | None:
    """The document's chunk count (and status, where documents have one) once it is searchable or failed, else None."""
    from django.db import close_old_connections
    from django.db.models import Count

    from kb.models import Document

    close_old_connections()
    field_names = {f.name for f in Document._meta.get_fields()}
    columns = ["chunk_total"] + (["status"] if "status" in field_names else [])
    row = (
        Document.objects.filter(tenant_id=tenant_id, doc_id=doc_id)
        .annotate(chunk_total=Count("chunks"))
        .values(*columns)
    ).first()
    if row and (row.get("status") == "failed" or (row["chunk_total"] and row.get("status", "ready") == "ready")):
        return row
    return None


def scenario_kb_isolation(ctx: Context) -> dict:
    args = ctx.args
    others = tenants_create(args.kb_other_tenants, ctx.run_id, "kbother")
    (heavy,) = tenants_create(1, ctx.run_id, "kbheavy")
    seeder = Client(ctx.server.base_url, Recorder())
    ctx.fake.set_failure_rate(0.0)
    tenants_seed(seeder, others, ctx.texts, random.Random(args.seed))
    drain([t.id for t in [*others, heavy]], args.drain_timeout, ctx.server)
    size = int(args.kb_upload_mb * 1024 * 1024)
    marker = f"lm{ctx.run_id}kbheavy"
    text = ctx.texts.document(random.Random(args.seed), size_bytes=size, title="Field notes", marker=marker)
    print(
        f"\n== kb-isolation: {args.kb_agents} clients on {len(others)} other tenants' /context; "
        f"idle {args.kb_idle:g} s, then during a {len(text.encode()) / 1e6:.2f} MB upload until it is indexed",
        flush=True,
    )
    idle = context_load(ctx, others, args.kb_agents, threading.Event(), args.kb_idle)

    upload: dict = {}
    finished = threading.Event()

    def uploader() -> None:
        client = Client(ctx.server.base_url, Recorder())
        files = {"file": ("field-notes.md", text.encode(), "text/markdown")}
        started = time.monotonic()
        sample, body = client.call("kb", heavy, files=files, data={"doc_id": "heavy/field-notes.md"})
        upload.update(status=sample.status, request_s=sample.ms / 1000, error=sample.error)
        upload["answer"] = {k: v for k, v in (body or {}).items() if k in ("outcome", "status", "chunks_written")}
        while not ctx.stop.is_set() and time.monotonic() - started < args.kb_window and 200 <= sample.status < 300:
            row = document_indexed(heavy.id, "heavy/field-notes.md")
            if row:
                upload.update(
                    indexed_s=time.monotonic() - started, chunks=row["chunk_total"], doc_status=row.get("status")
                )
                break
            time.sleep(0.5)
        client.close()
        finished.set()

    thread = threading.Thread(target=uploader, daemon=True)
    during_started = time.monotonic()
    thread.start()
    during = context_load(ctx, others, args.kb_agents, finished, args.kb_window)
    during_s = time.monotonic() - during_started
    finished.wait(timeout=5)

    def figures(samples: list[Sample], seconds: float) -> dict:
        ms = [s.ms for s in samples]
        return {
            "count": len(samples),
            "seconds": seconds,
            "p50": percentile(ms, 0.5),
            "p95": percentile(ms, 0.95),
            "p99": percentile(ms, 0.99),
            "max": max(ms, default=float("nan")),
            "errors": sum(not 200 <= s.status < 300 for s in samples),
        }

    result = {
        "scenario": "kb-isolation",
        "upload_bytes": len(text.encode()),
        "upload": upload,
        "idle": figures(idle, args.kb_idle),
        "during": figures(during, during_s),
    }
    result["p95_ratio"] = result["during"]["p95"] / result["idle"]["p95"] if idle else float("nan")
    header = f"{'count':>6} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>8} {'errors':>6}"
    print(f"{'other tenants /context':<24} {header}")
    for name in ("idle", "during"):
        row = result[name]
        print(
            f"{name + ' (' + format(row['seconds'], '.0f') + ' s)':<24} {row['count']:>6} {row['p50']:>8.1f} "
            f"{row['p95']:>8.1f} {row['p99']:>8.1f} {row['max']:>8.1f} {row['errors']:>6}"
        )
    print(f"p95 during / idle: {result['p95_ratio']:.2f}x (target under 2x)")
    indexed = (
        f"indexed after {upload['indexed_s']:.1f} s ({upload.get('chunks')} chunks)"
        if "indexed_s" in upload
        else "NOT indexed within the window"
    )
    print(
        f"upload: answered {upload.get('status')} {upload.get('answer') or upload.get('error')} in "
        f"{upload.get('request_s', float('nan')):.1f} s; {indexed}"
    )
    return result


def scenario_episode_append(ctx: Context) -> dict:
    args = ctx.args
    (tenant,) = tenants_create(1, ctx.run_id, "append")
    markers = Markers(f"{ctx.run_id}append")
    turns = [turn for session in ctx.texts.sessions for turn in session]
    speakers = {turns[0].speaker: "user"}
    client = Client(ctx.server.base_url, Recorder())
    user, session_id = tenant.users[0], f"long-{ctx.run_id}"
    print(f"\n== episode-append: {args.turns} turns posted one at a time to one session ({args.post_mode})", flush=True)
    ctx.fake.set_failure_rate(0.0)
    posted: list[dict] = []
    samples: list[Sample] = []
    writes: list[Write] = []
    for number in range(args.turns):
        if ctx.stop.is_set():
            break
        turn = turns[number % len(turns)]
        role = speakers.setdefault(turn.speaker, "assistant")
        marker = markers.new(0)
        message = {"role": role, "content": f"{turn.speaker}: {turn.text} ({marker})"}
        posted.append(message)
        messages = posted if args.post_mode == "snapshot" else [message]
        sample, body = client.call(
            "episodes", tenant, json={"user_id": user, "session_id": session_id, "messages": messages}
        )
        samples.append(sample)
        writes.append(Write("episodes", 0, user, [marker], sample.status, session_id=session_id, error=sample.error))
    ms = [s.ms for s in samples]
    first, last = ms[:50], ms[-50:]
    mean = lambda values: sum(values) / len(values) if values else float("nan")  # noqa: E731
    bins = [round(mean(ms[start : start + 50]), 1) for start in range(0, len(ms), 50)]
    drained_in, left = drain([tenant.id], args.drain_timeout, ctx.server)
    check = count_check(writes, [tenant], client, markers)
    client.close()
    result = {
        "scenario": "episode-append",
        "turns": len(samples),
        "post_mode": args.post_mode,
        "first_50_mean_ms": mean(first),
        "last_50_mean_ms": mean(last),
        "ratio": mean(last) / mean(first) if first else float("nan"),
        "mean_ms_per_50": bins,
        "p95_ms": percentile(ms, 0.95),
        "errors": sum(not 200 <= s.status < 300 for s in samples),
        "count_check": check,
        "drain": {"seconds": drained_in, "left": left},
    }
    print(f"mean ms per post, by 50: {bins}")
    print(
        f"first 50: {result['first_50_mean_ms']:.1f} ms, last 50: {result['last_50_mean_ms']:.1f} ms, "
        f"ratio {result['ratio']:.2f}x (target within 1.5x); errors {result['errors']}"
    )
    print_check({"episode_messages": check["episode_messages"]}, errors_by_status(samples, writes), left, drained_in)
    return result


# --- main -----------------------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", choices=["mixed", "kb-isolation", "episode-append", "all"], default="mixed")
    parser.add_argument("--quick", action="store_true", help="everything smaller: about two minutes")
    parser.add_argument("--agents", type=int, default=None, help="mixed: concurrent agents (50; quick 10)")
    parser.add_argument("--duration", type=float, default=None, help="mixed: seconds (60; quick 15)")
    parser.add_argument("--embedding-failure-rate", type=float, default=0.0, help="mixed: share of failed embeddings")
    parser.add_argument("--both", action="store_true", help="mixed: at the given failure rate, then at 0.5")
    parser.add_argument("--think-ms", type=float, default=0.0, help="mean pause between an agent's requests")
    parser.add_argument("--max-requests", type=int, default=200_000, help="mixed: request budget of a run")
    parser.add_argument("--kb-upload-mb", type=float, default=None, help="kb-isolation: upload size (3; quick 1)")
    parser.add_argument("--kb-agents", type=int, default=None, help="kb-isolation: /context clients (8; quick 4)")
    parser.add_argument("--kb-other-tenants", type=int, default=4)
    parser.add_argument("--kb-idle", type=float, default=None, help="kb-isolation: idle seconds (20; quick 8)")
    parser.add_argument("--kb-window", type=float, default=None, help="kb-isolation: longest wait (300; quick 90)")
    parser.add_argument("--turns", type=int, default=None, help="episode-append: turns (500; quick 300)")
    parser.add_argument(
        "--post-mode",
        choices=["latest", "snapshot"],
        default="latest",
        help="episode-append: post the new turn, or the whole session so far",
    )
    parser.add_argument("--drain-timeout", type=float, default=None, help="seconds to wait for the worker (180)")
    parser.add_argument("--openai-max-retries", type=int, default=0, help="the server's OPENAI_MAX_RETRIES")
    parser.add_argument("--openai-timeout", type=float, default=5.0, help="the server's OPENAI_TIMEOUT")
    parser.add_argument(
        "--embedder",
        choices=["fake", "local"],
        default="fake",
        help="fake: the OpenAI-compatible fake (with faults); local: the bundled MiniLM",
    )
    parser.add_argument(
        "--self-check",
        action="store_true",
        help="mixed: erase one user and one document before the count check, to see it catch them",
    )
    parser.add_argument("--seed", type=int, default=17)
    args = parser.parse_args()
    if args.embedder == "local" and (args.embedding_failure_rate or args.both):
        parser.error("faults are injected through the fake embedding server: --embedder local takes no failure rate")
    defaults = {
        "agents": (50, 10),
        "duration": (60.0, 15.0),
        "kb_upload_mb": (3.0, 1.0),
        "kb_agents": (8, 4),
        "kb_idle": (20.0, 8.0),
        "kb_window": (300.0, 90.0),
        "turns": (500, 300),
        "drain_timeout": (180.0, 30.0),
    }
    for name, (full, quick) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    return args


def plan(args) -> list[tuple[str, float]]:
    """The runs in order. The faulty mixed run (--both) comes last: the retries it leaves in the worker's queue would
    weigh on the latency figures of the runs after it."""
    rates = [args.embedding_failure_rate] + ([0.5] if args.both and args.embedding_failure_rate != 0.5 else [])
    mixed = [("mixed", rate) for rate in rates]
    if args.scenario == "all":
        return [mixed[0], ("kb-isolation", 0.0), ("episode-append", 0.0), *mixed[1:]]
    return mixed if args.scenario == "mixed" else [(args.scenario, 0.0)]


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main() -> None:
    args = parse_args()
    # Explicit: a shell may start us with SIGINT ignored; SIGTERM should stop the servers too.
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    run_id = uuid.uuid4().hex[:6]
    stop = threading.Event()
    log_path = VAR / f"load-server-{run_id}.log"
    fake = _server.FakeEmbeddingServer(seed=args.seed)
    server = None
    results = []
    try:
        env = server_environment(args, fake.base_url)
        server = _server.ProductionServer(env=env, log_path=log_path)
        django_setup(env)
        started = time.monotonic()
        server.start()
        ready = server.wait_ready()
        print(
            f"manage.py serve ({args.embedder} embedder) on {server.base_url} ready in "
            f"{time.monotonic() - started:.1f} s "
            f"({ready.get('checks')}); log {log_path}; {os.cpu_count()} cores, "
            f"load average {os.getloadavg()[0]:.2f}",
            flush=True,
        )
        ctx = Context(args, server, fake, Texts(args.seed), run_id, stop)
        for scenario, rate in plan(args):
            if scenario == "mixed":
                results.append(scenario_mixed(ctx, rate))
            elif scenario == "kb-isolation":
                results.append(scenario_kb_isolation(ctx))
            else:
                results.append(scenario_episode_append(ctx))
            if stop.is_set():
                break
    except KeyboardInterrupt:
        stop.set()
        print("\ninterrupted: stopping the server", file=sys.stderr)
    finally:
        stop.set()
        if server is not None:
            seconds = server.stop()
            print(f"manage.py serve stopped in {seconds:.1f} s")
        fake.stop()
    if results:
        path = save(args.scenario + ("-quick" if args.quick else ""), {"args": vars(args), "runs": results})
        print(f"figures written to {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
