"""Mem0's requests in our terms, and our facts and their events in Mem0's shapes. Pure: no database, no settings.

A Mem0 memory is one of our facts: current (not superseded) and active. Pending facts wait for review and are not
memories until approved; rejected, archived and superseded facts are history."""

import ast
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from django.core.exceptions import ValidationError

from core.errors import ApplicationError
from core.parsers import json_problem_check
from core.timestamps import RANGE_MESSAGE, in_range, parse_timestamp, timestamp_text
from core.validation import IDENTIFIER_MESSAGE, IDENTIFIER_PATTERN
from facts.models import Fact

CATEGORIES = tuple(Fact.Category.values)
AGENT_ID_PATTERN = re.compile(r"^[^\x00-\x1f\x7f]{1,255}$")
AGENT_ID_MESSAGE = "Must be 1-255 characters without control characters."
MAX_QUERY_FILTERS_CHARS = 4000


def not_supported(name: str, reason: str) -> ApplicationError:
    """A Mem0 feature this service does not have: 400 with code not_supported, naming the parameter."""
    return ApplicationError(f"{name}: {reason}", code="not_supported", status_code=400, details={name: [reason]})


def user_id_required() -> ApplicationError:
    return ApplicationError(
        "user_id is required: memories here belong to one user (give it as filters={'user_id': ...}); memories of "
        "an agent, app or run alone are not supported.",
        code="user_id_required",
        status_code=400,
        details={"user_id": ["This field is required."]},
    )


# --- parameters --------------------------------------------------------------------------------------------------


def _absent(value) -> bool:
    return value is None or value is False or value == "" or value == [] or value == {}


# Mem0 parameters this service lacks: (values that ask for nothing, so pass, why any other value is refused).
REFUSED: dict[str, tuple[Callable[[object], bool], str]] = {
    "app_id": (_absent, "apps are not supported: facts belong to a user_id (and optionally an agent_id)"),
    "run_id": (_absent, "runs are not supported here: facts belong to a user_id (and optionally an agent_id)"),
    "enable_graph": (_absent, "graph memory is not supported"),
    "custom_categories": (_absent, f"custom categories are not supported: a fact's category is one of {CATEGORIES}"),
    "custom_instructions": (_absent, "custom extraction instructions are not supported"),
    "agent_custom_instructions": (_absent, "custom extraction instructions are not supported"),
    "includes": (_absent, "extraction include rules are not supported"),
    "excludes": (_absent, "extraction exclude rules are not supported"),
    "structured_data_schema": (_absent, "structured extraction is not supported"),
    "expiration_date": (_absent, "expiring memories are not supported (the tenant's forget policy forgets facts)"),
    "immutable": (_absent, "immutable memories are not supported"),
    "memory_type": (_absent, "procedural memory is not supported"),
    "reference_date": (_absent, "a reference date for relative times is not supported"),
    "filter_memories": (_absent, "filter_memories is not supported"),
    "start_date": (_absent, "date ranges are not supported"),
    "end_date": (_absent, "date ranges are not supported"),
    "metadata": (_absent, "filtering by metadata is not supported"),
    "latest_only": (lambda value: value in (None, True), "only the latest version is a memory here (see history)"),
    "output_format": (lambda value: value in (None, "v1.1"), "only the v1.1 output format is answered"),
}
# Accepted, and change nothing: the tenant comes from the API key (older clients send back the org and project the
# key check answered), ranking is always hybrid (vector + keywords) with MMR diversity, adds with infer are always
# extracted in the background, nothing expires.
NO_EFFECT = frozenset(
    {"org_id", "project_id", "org_name", "project_name", "version", "async_mode", "rerank", "keyword_search",
     "show_expired"}
)  # fmt: skip


def accepted(data, *, reads: frozenset[str]) -> dict:
    """The parameters of `data` that the operation `reads`; the Mem0 ones that change nothing are dropped, those
    asking for a feature this service lacks are refused (not_supported), and unknown names are a validation error."""
    if not isinstance(data, dict):
        raise ValidationError({"non_field_errors": "Must be a JSON object."})
    kept, unknown = {}, []
    for name, value in data.items():
        if name in reads:
            kept[name] = value
        elif name in NO_EFFECT:
            continue
        elif name in REFUSED:
            harmless, reason = REFUSED[name]
            if not harmless(value):
                raise not_supported(name, reason)
        else:
            unknown.append(name)
    if unknown:
        raise ValidationError({name: "Unknown field." for name in unknown})
    return kept


# --- filters ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scope:
    """Whose facts a request reads or deletes: one user, optionally one agent, optionally some categories."""

    user_id: str
    agent_id: str | None = None
    categories: tuple[str, ...] | None = None


# Filter keys Mem0 knows that this service cannot honour.
FILTER_REFUSED = {
    "app_id": REFUSED["app_id"][1],
    "run_id": REFUSED["run_id"][1],
    "created_at": "filtering by date is not supported",
    "updated_at": "filtering by date is not supported",
    "keywords": "filtering by keywords is not supported (search ranks by keywords already)",
    "metadata": REFUSED["metadata"][1],
    "memory_ids": "filtering by memory ids is not supported: get each memory by its id",
}
_OR_REFUSED = (
    "OR across different users, agents or categories is not supported: facts are per user; ask once per user or agent"
)


def scope_of(filters=None, *, user_id=None, agent_id=None, categories=None) -> Scope:
    """The scope named by Mem0 `filters` (plain keys, AND, and OR of branches that name the same scope) together with
    the top-level user_id / agent_id / categories that v1 calls send. A user_id is required."""
    found: dict = {}
    for name, value in (("user_id", user_id), ("agent_id", agent_id)):
        if value is not None:
            _add(found, name, _id_value(name, value, name), name)
    if categories is not None:
        _add(found, "categories", _categories(categories, "categories"), "categories")
    if filters is not None:
        _walk(filters, found, "filters")
    if "user_id" not in found:
        raise user_id_required()
    return Scope(**found)


def _walk(node, found: dict, path: str) -> None:
    if not isinstance(node, dict):
        raise ValidationError({path: "Must be an object."})
    for key, value in node.items():
        here = f"{path}.{key}"
        if key == "AND":
            for index, branch in enumerate(_branches(value, here)):
                _walk(branch, found, f"{here}[{index}]")
        elif key == "OR":
            scopes = []
            for index, branch in enumerate(_branches(value, here)):
                scopes.append({})
                _walk(branch, scopes[-1], f"{here}[{index}]")
            if any(scope != scopes[0] for scope in scopes):
                raise not_supported(here, _OR_REFUSED)
            for name, named in scopes[0].items():
                _add(found, name, named, here)
        elif key == "NOT":
            raise not_supported(here, "NOT is not supported")
        elif key in ("user_id", "agent_id"):
            _add(found, key, _id_value(key, value, here), here)
        elif key == "categories":
            _add(found, key, _categories(value, here), here)
        elif key in FILTER_REFUSED:
            raise not_supported(here, FILTER_REFUSED[key])
        else:
            raise ValidationError({here: "Unknown filter."})


def _branches(value, path: str) -> list:
    if not isinstance(value, list) or not value:
        raise ValidationError({path: "Must be a non-empty list of filters."})
    return value


def _add(found: dict, name: str, value, path: str) -> None:
    if name in found and found[name] != value:
        raise ValidationError({path: f"Names another {name} than the rest of the request: one {name} per request."})
    found[name] = value


def _id_value(name: str, value, path: str) -> str:
    """A user or agent id: a plain string, {"eq": id} or {"in": [id]}."""
    if isinstance(value, dict):
        if len(value) != 1:
            raise ValidationError({path: "Must be an id, or one operator (eq, or in with one id)."})
        operator, operand = next(iter(value.items()))
        if operator == "eq":
            return _id_value(name, operand, f"{path}.eq")
        if operator == "in" and isinstance(operand, list) and len(operand) == 1:
            return _id_value(name, operand[0], f"{path}.in[0]")
        if operator == "in":
            raise not_supported(f"{path}.in", f"one {name} per request: ask once per {name.removesuffix('_id')}")
        raise not_supported(f"{path}.{operator}", f"only equality is supported for {name}")
    if value == "*":
        hint = "omit agent_id to include every agent" if name == "agent_id" else "name one user"
        raise not_supported(path, f"the wildcard * is not supported: {hint}")
    if not isinstance(value, str):
        raise ValidationError({path: "Must be a string."})
    if name == "user_id" and not IDENTIFIER_PATTERN.fullmatch(value):
        raise ValidationError({path: IDENTIFIER_MESSAGE})
    if name == "agent_id" and not AGENT_ID_PATTERN.fullmatch(value):
        raise ValidationError({path: AGENT_ID_MESSAGE})
    return value


def _categories(value, path: str) -> tuple[str, ...]:
    """Categories as a name, a list, {"in": [...]} or {"contains": name} (a fact has one category)."""
    if isinstance(value, dict):
        if len(value) != 1 or next(iter(value)) not in ("in", "contains"):
            raise not_supported(path, "categories take a name, a list, {'in': [...]} or {'contains': name}")
        value = next(iter(value.values()))
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not names or not all(isinstance(name, str) for name in names):
        raise ValidationError({path: "Must be a category or a non-empty list of categories."})
    unknown = sorted(set(names) - set(CATEGORIES))
    if unknown:
        raise ValidationError({path: f"Unknown categories {unknown}; a fact's category is one of {list(CATEGORIES)}."})
    return tuple(sorted(set(names)))


def add_ids(body: dict) -> tuple[Scope, str | None]:
    """Whose memory an add writes, and its run_id: top level (as Mem0's add documents) or in `filters`."""
    filters = body.get("filters")
    if filters is not None and not isinstance(filters, dict):
        raise ValidationError({"filters": "Must be an object."})
    filters = dict(filters or {})
    run_id = body.get("run_id")
    if "run_id" in filters:
        in_filters = filters.pop("run_id")
        if run_id is not None and in_filters != run_id:
            raise ValidationError({"filters.run_id": "Names another run_id than the request's run_id."})
        run_id = in_filters
    if run_id is not None and (not isinstance(run_id, str) or not IDENTIFIER_PATTERN.fullmatch(run_id)):
        raise ValidationError({"run_id": IDENTIFIER_MESSAGE})
    scope = scope_of(filters or None, user_id=body.get("user_id"), agent_id=body.get("agent_id"))
    if scope.categories is not None:
        raise ValidationError({"filters.categories": "An add does not filter by category."})
    return scope, run_id


def filters_from_query(text: str) -> dict:
    """The `filters` query parameter of delete_all: JSON, or the Python dict repr that mem0ai's client sends (httpx
    writes a dict parameter with str())."""
    if len(text) > MAX_QUERY_FILTERS_CHARS:
        raise ValidationError({"filters": f"Must be at most {MAX_QUERY_FILTERS_CHARS} characters."})
    for parse in (json.loads, ast.literal_eval):  # literal_eval evaluates literals only, never code
        try:
            value = parse(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(value, dict):
            json_problem_check(value)  # a Python literal may hold what PostgreSQL cannot store (NUL)
            return value
    raise ValidationError({"filters": 'Must be a JSON object, e.g. {"user_id": "alice"}.'})


def moment_of(value, *, field: str) -> datetime | None:
    """A Mem0 timestamp: Unix seconds (int or float), or ISO 8601 text."""
    if value is None:
        return None
    if isinstance(value, str):
        return parse_timestamp(value, field=field)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError({field: "Must be a Unix timestamp in seconds, or ISO 8601 text."})
    try:
        moment = datetime.fromtimestamp(value, UTC)
    except (OverflowError, OSError, ValueError):
        raise ValidationError({field: RANGE_MESSAGE}) from None
    if not in_range(moment):
        raise ValidationError({field: RANGE_MESSAGE})
    return moment


# --- answers ------------------------------------------------------------------------------------------------------

MEMORY_FIELDS = (
    "id", "memory", "hash", "user_id", "agent_id", "app_id", "run_id", "metadata", "categories", "immutable",
    "expiration_date", "created_at", "updated_at", "score",
)  # fmt: skip


def memory_of(fact, *, score: float | None = None) -> dict:
    """A fact (any object with the Fact fields) as a Mem0 memory."""
    memory = {
        "id": str(fact.pk),
        "memory": fact.content,
        "hash": hashlib.md5(fact.content.encode(), usedforsecurity=False).hexdigest(),
        "user_id": fact.user_id,
        "agent_id": fact.agent_id or None,
        "app_id": None,
        "run_id": None,
        "metadata": fact.metadata or {},
        "categories": [fact.category],
        "immutable": False,
        "expiration_date": None,
        "created_at": timestamp_text(fact.created_at),
        "updated_at": timestamp_text(fact.updated_at),
    }
    if score is not None:
        memory["score"] = score
    return memory


def field_names(fields: list[str] | None) -> frozenset[str] | None:
    """The memory fields a call asked for (None: all), checked before anything is read."""
    if fields is None:
        return None
    unknown = sorted(set(fields) - set(MEMORY_FIELDS))
    if unknown:
        raise ValidationError({"fields": f"Unknown fields {unknown}; choose from {list(MEMORY_FIELDS)}."})
    return frozenset(fields)


def only_fields(memory: dict, names: frozenset[str] | None) -> dict:
    """A memory reduced to the field `names` (see field_names; None: all of them)."""
    if names is None:
        return memory
    return {name: value for name, value in memory.items() if name in names}


def added_events(facts) -> list[dict]:
    """What Mem0 answers for an add without inference: one ADD event per stored memory."""
    return [{"id": str(fact.pk), "memory": fact.content, "event": "ADD"} for fact in facts]


def queued(episode_id: int) -> dict:
    """What Mem0 answers for an add with inference: queued; the episode's extraction runs in the background."""
    return {
        "message": "Memory processing has been queued for background execution",
        "status": "PENDING",
        "event_id": str(episode_id),
        "episode_id": episode_id,  # its extraction status: GET /api/v1/episodes/{episode_id}
    }


@dataclass(frozen=True)
class EventRow:
    """One of our fact events (facts.models.FactEvent), as history reads it."""

    id: int
    fact_id: int
    user_id: str
    action: str
    before: dict | None
    after: dict | None
    created_at: datetime


_GONE = ("deleted", "purged")


def history_entries(events: list[EventRow], *, current_content: str | None) -> list[dict]:
    """Our events of one fact (oldest first) as Mem0 history: ADD when the fact became a memory (created active,
    approved, restored, reinstated), UPDATE when a memory's content, category or metadata changed, DELETE when it
    stopped being one (deleted, superseded, rejected, archived). Changes while it was no memory (pending) and
    bookkeeping (confidence, usage, pins) are left out. `current_content`: the fact's content now (None: gone), for
    events whose snapshot does not hold it (an import's creation)."""
    contents = _contents_after(events, current_content)
    entries, was_memory, content_before = [], False, None
    for event, content_after in zip(events, contents, strict=True):
        before = event.before or {}
        if "content" in before:
            content_before = before["content"]
        if "status" in before:
            was_memory = _is_memory(before)
        after = event.after or {}
        is_memory = False if event.action in _GONE else (_is_memory(after) if "status" in after else was_memory)
        kind = None
        if not was_memory and is_memory:
            kind, old, new = "ADD", None, content_after
        elif was_memory and not is_memory:
            kind, old, new = "DELETE", content_before, None
        elif was_memory and _visible_change(before, after):
            kind, old, new = "UPDATE", content_before, content_after
        if kind is not None:
            entries.append(_entry(event, kind, old, new))
        was_memory, content_before = is_memory, content_after
    return entries


def _contents_after(events: list[EventRow], current_content: str | None) -> list[str | None]:
    """The content each event left the fact with: its own snapshot's, else the next snapshot taken before a change,
    else the fact's content now."""
    contents, known = [None] * len(events), current_content
    for index in range(len(events) - 1, -1, -1):
        event = events[index]
        if event.action in _GONE:
            known = None
        elif event.after and "content" in event.after:
            known = event.after["content"]
        contents[index] = known
        if event.before and "content" in event.before:
            known = event.before["content"]
    return contents


def _is_memory(snapshot: dict) -> bool:
    return snapshot.get("status") == "active" and snapshot.get("valid_to") is None


def _visible_change(before: dict, after: dict) -> bool:
    return any(name in before and name in after and before[name] != after[name] for name in _VISIBLE)


_VISIBLE = ("content", "category", "metadata")


def _entry(event: EventRow, kind: str, old: str | None, new: str | None) -> dict:
    created = timestamp_text(event.created_at)
    return {
        "id": str(event.id),
        "memory_id": str(event.fact_id),
        "event": kind,
        "old_memory": old,
        "new_memory": new,
        "user_id": event.user_id,
        "is_deleted": kind == "DELETE",
        "created_at": created,
        "updated_at": created,
    }


PROJECT_ID = "default"


def ping(*, tenant_name: str) -> dict:
    """The key check MemoryClient makes when constructed. It requires an org_id and a project_id (its project
    manager refuses to start without them): the tenant's name and "default", which name nothing more than the key
    does. No user_email: the client would only use it for its telemetry."""
    return {
        "status": "ok",
        "message": "The API key is valid.",
        "org_id": tenant_name,
        "project_id": PROJECT_ID,
        "user_email": None,
    }
