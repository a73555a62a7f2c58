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
from facts.selectors import fact_filters_parse
from search.filters import MAX_CONDITIONS, MAX_DEPTH, OPERATORS, All, Any_, Condition, FilterError, Not
from search.filters import Node as FilterNode

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
    "metadata": (_absent, "metadata filters go in filters here: {'metadata': {key: value}}"),
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
    """Whose facts a request reads or deletes: one user, optionally one agent and some categories (named plainly at
    the top of the filters), and whatever else the filters ask, in the filter language."""

    user_id: str
    agent_id: str | None = None
    categories: tuple[str, ...] | None = None
    filters: FilterNode | None = None


# Filter keys Mem0 knows that this service cannot honour.
FILTER_REFUSED = {
    "app_id": REFUSED["app_id"][1],
    "run_id": REFUSED["run_id"][1],
}
_OR_REFUSED = "OR across different users is not supported: facts are per user; ask once per user"
_VALUE_OPERATORS = frozenset(OPERATORS)
_NOTHING = Not(Condition("id", (), "exists", True))  # what NOT of every fact of the user selects: no fact


@dataclass(frozen=True)
class _Part:
    """A translated part of Mem0's filters: its condition (None: every fact of the user), the user it confines the
    facts to, and whether it names a user at all."""

    node: FilterNode | None
    user_id: str | None = None
    names_user: bool = False


def scope_of(filters=None, *, user_id=None, agent_id=None, categories=None, metadata=None) -> Scope:
    """The scope named by Mem0 `filters` together with the top-level user_id / agent_id / categories / metadata that
    v1 calls send. Mem0's filters: AND / OR / NOT; user_id, agent_id, categories, created_at, updated_at, metadata
    (its keys, nested), memory_ids, keywords; operators eq, ne, in, nin, gt, gte, lt, lte, contains, icontains and
    the wildcard "*". They must confine the request to one user: a user_id in the top-level AND, or in every branch
    of an OR (the same one)."""
    found: dict = {}
    for name, value in (("user_id", user_id), ("agent_id", agent_id)):
        if value is not None:
            _add(found, name, _id_value(name, value, name), name)
    parts = []
    if categories is not None and _plain_categories(categories):
        _add(found, "categories", _categories(categories, "categories"), "categories")
    elif categories is not None:
        parts.append(_Part(_category(categories, "")))
    if metadata:
        parts.append(_Part(_metadata(metadata, "")))
    if filters is not None and filters != {}:  # mem0ai sends {} for no filter
        part = _Translation(found).part(filters, "filters", depth=1, top=True)
        if part.user_id is not None:
            _add(found, "user_id", part.user_id, "filters")
        parts.append(part)
    if "user_id" not in found:
        raise user_id_required()
    nodes = [part.node for part in parts if part.node is not None]
    node = nodes[0] if len(nodes) == 1 else All(tuple(nodes)) if nodes else None
    if node is not None and _conditions(node) > MAX_CONDITIONS:
        raise ValidationError({"filters": f"More than {MAX_CONDITIONS} conditions."})
    return Scope(**found, filters=node)


class _Translation:
    def __init__(self, found: dict):
        self.found = found  # the scope named plainly at the top: user_id, agent_id, categories

    def part(self, value, path: str, *, depth: int, top: bool) -> _Part:
        """`value` translated; at the `top` (the top-level AND), a plain user, agent or categories name the scope."""
        if depth > MAX_DEPTH:
            raise ValidationError({path: f"Nested deeper than {MAX_DEPTH} levels."})
        if not isinstance(value, dict) or not value:
            raise ValidationError({path: "Must be a non-empty object."})
        parts = []
        for key, item in value.items():
            here = f"{path}.{key}"
            if key in ("AND", "OR"):
                children = [
                    self.part(child, f"{here}[{n}]", depth=depth + 1, top=top and key == "AND")
                    for n, child in enumerate(_branches(item, here))
                ]
                parts.append(_all(children, here) if key == "AND" else _any(children, here))
            elif key == "NOT":
                child = item[0] if isinstance(item, list) and len(item) == 1 else item
                negated = self.part(child, here, depth=depth + 1, top=False)
                if negated.names_user:
                    raise not_supported(here, "NOT of a user_id is not supported: a request reads one user's memories")
                parts.append(_Part(Not(negated.node) if negated.node is not None else _NOTHING))
            elif key == "user_id":
                user = _id_value(key, item, here)
                if top:
                    _add(self.found, key, user, here)
                parts.append(_Part(None, user, True))
            elif key == "agent_id" and top and _plain_id(item):
                _add(self.found, key, _id_value(key, item, here), here)
            elif key == "agent_id":
                parts.append(_Part(_agent(item, path, here)))
            elif key == "categories" and top and _plain_categories(item):
                _add(self.found, key, _categories(item, here), here)
            elif key == "categories":
                parts.append(_Part(_category(item, path)))
            elif key in ("created_at", "updated_at"):
                parts.append(_Part(_condition({key: item}, path)))
            elif key == "metadata":
                parts.append(_Part(_metadata(item, path)))
            elif key == "memory_ids":
                parts.append(_Part(_condition({"id": {"in": _memory_ids(item, here)}}, path, here)))
            elif key == "keywords":
                parts.append(_Part(_keywords(item, path, here)))
            elif key in FILTER_REFUSED:
                raise not_supported(here, FILTER_REFUSED[key])
            else:
                raise ValidationError({here: "Unknown filter."})
        return _all(parts, path)


def _all(parts: list[_Part], path: str) -> _Part:
    users = {part.user_id for part in parts if part.user_id is not None}
    if len(users) > 1:
        raise ValidationError({path: "Names another user_id than the rest of the request: one user_id per request."})
    nodes = [part.node for part in parts if part.node is not None]
    node = nodes[0] if len(nodes) == 1 else All(tuple(nodes)) if nodes else None
    return _Part(node, next(iter(users), None), any(part.names_user for part in parts))


def _any(parts: list[_Part], path: str) -> _Part:
    users = {part.user_id for part in parts}
    names_user = any(part.names_user for part in parts)
    if names_user and (len(users) != 1 or None in users):
        raise not_supported(path, _OR_REFUSED)
    if any(part.node is None for part in parts):  # one branch holds every fact of the user
        return _Part(None, next(iter(users)), names_user)
    return _Part(Any_(tuple(part.node for part in parts)), next(iter(users)), names_user)


def _conditions(node: FilterNode) -> int:
    if isinstance(node, All | Any_):
        return sum(_conditions(part) for part in node.parts)
    return _conditions(node.part) if isinstance(node, Not) else 1


def _condition(value: dict, path: str, named: str | None = None) -> FilterNode:
    """One condition in the filter language; a refusal names Mem0's path (`named` when its name is not ours)."""
    try:
        return fact_filters_parse(value, path=path)
    except FilterError as error:
        where = error.path.lstrip(".") if named is None else named
        raise ValidationError({where: error.reason}) from None


def _plain_id(value) -> bool:
    return (
        isinstance(value, str)
        and value != "*"
        or (isinstance(value, dict) and len(value) == 1 and ("eq" in value or _one_of(value.get("in"))))
    )


def _one_of(value) -> bool:
    return isinstance(value, list) and len(value) == 1


def _agent(value, path: str, here: str) -> FilterNode:
    """agent_id as a condition: the wildcard is any agent (a fact saved for no agent has none)."""
    if value == "*":
        return _condition({"agent_id": {"ne": ""}}, path)
    if isinstance(value, str):
        _id_value("agent_id", value, here)
    return _condition({"agent_id": value}, path)


def _plain_categories(value) -> bool:
    return value != "*" and (
        not isinstance(value, dict) or (len(value) == 1 and next(iter(value)) in ("in", "contains"))
    )


def _category(value, path: str) -> FilterNode | None:
    """categories as a condition on the fact's one category ("contains" a name: it is that one)."""
    if value == "*":
        return None
    if isinstance(value, list):
        value = {"in": value}
    elif isinstance(value, dict):
        value = {("eq" if op == "contains" else op): item for op, item in value.items()}
    try:
        return fact_filters_parse({"category": value}, path=path)
    except FilterError as error:
        raise ValidationError({error.path.replace(".category", ".categories", 1).lstrip("."): error.reason}) from None


def _metadata(value, path: str, keys: tuple[str, ...] = ()) -> FilterNode:
    """Mem0's {"metadata": {key: value or {operator: value}}} (keys nested as objects): every key's condition.
    `path` is where the metadata is ("" for the top-level parameter)."""
    if not isinstance(value, dict) or not value:
        raise ValidationError({".".join([path, "metadata", *keys]).lstrip("."): "Must be an object of metadata keys."})
    conditions = []
    for key, item in value.items():
        if item == "*":  # any value
            item = {"exists": True}
        if isinstance(item, dict) and item and not set(item) & _VALUE_OPERATORS:
            conditions.append(_metadata(item, path, (*keys, key)))  # a nested key
        else:
            conditions.append(_condition({".".join(["metadata", *keys, key]): item}, path))
    return conditions[0] if len(conditions) == 1 else All(tuple(conditions))


def _memory_ids(value, path: str) -> list[int]:
    ids = value if isinstance(value, list) else None
    if not ids or not all(isinstance(item, int | str) and str(item).isascii() and str(item).isdigit() for item in ids):
        raise ValidationError({path: "Must be a non-empty list of memory ids."})
    return [int(item) for item in ids]


def _keywords(value, path: str, here: str) -> FilterNode:
    """Words the memory's text holds: a string (ignoring case), or {"contains" | "icontains": text}."""
    if isinstance(value, str):
        value = {"icontains": value}
    if not isinstance(value, dict) or not value or not set(value) <= {"contains", "icontains"}:
        raise ValidationError({here: "Must be text, or {'contains': text} or {'icontains': text}."})
    return _condition({"content": value}, path, here)


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
        hint = "name one user" if name == "user_id" else "give it in filters: {'agent_id': '*'}"
        raise not_supported(path, f"the wildcard * is not supported for {name} here: {hint}")
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
    if scope.filters is not None:
        raise ValidationError({"filters": "An add names whose memory it writes (user_id, agent_id, run_id) only."})
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
