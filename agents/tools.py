"""The agent tools, defined once: each tool's name, the description that tells a model when to call it, the JSON
Schema of its arguments, and the handler that runs it through the services and selectors. GET /api/v1/tools,
POST /api/v1/tools/call and the MCP server (agents.mcp) all serve this one registry.

A tool call never raises for a bad call: an unknown tool, arguments that do not fit the schema, a fact that is not
the user's, a service that says no: each is a ToolResult with is_error and a message that says what was wrong, for
the agent loop to hand back to the model."""

import math
from collections.abc import Callable, Collection
from dataclasses import dataclass

import jsonschema
from django.conf import settings
from django.core.exceptions import ValidationError
from django.http import Http404
from rest_framework.utils import json as strict_json

from core.errors import ApplicationError
from core.parsers import json_problem_check
from core.quoting import DOCUMENTS_NOTE, DOCUMENTS_TAG, MEMORY_NOTE, MEMORY_TAG, block, neutralised
from core.validation import validate_user_id, validate_visible_text
from facts import selectors as fact_selectors
from facts import services as fact_services
from facts.models import Fact
from kb.selectors import kb_search_answer
from tenancy.models import Tenant
from tenancy.scopes import ALL_SCOPES, MEMORY_READ, MEMORY_WRITE

FORMATS = ("openai", "anthropic")
MAX_FACT_ID = 2**63 - 1  # a bigint: a larger id cannot name a fact (and PostgreSQL would refuse to compare it)
MAX_AGENT_ID_CHARS = 255


@dataclass(frozen=True)
class Caller:
    """Whose memory a tool call works on, and how the audit trail names who called."""

    tenant: Tenant
    user_id: str
    agent_id: str  # "" = every agent's facts of the user; otherwise only this agent's, and new facts carry it
    actor: str


@dataclass(frozen=True)
class ToolResult:
    content: str  # concise text for the model
    data: dict | None = None  # the structured result (None for an error)
    is_error: bool = False


class ToolError(Exception):
    """Raised by a handler: the call was wrong, and the message tells the model how."""


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict  # JSON Schema of the arguments (an object)
    handler: Callable[[Caller, dict], ToolResult]
    scope: str = MEMORY_READ  # what the caller's API key needs (tenancy.scopes)

    def definition(self, format: str) -> dict:
        """The tool as OpenAI's function calling or Anthropic's tool use expects it."""
        if format == "anthropic":
            return {"name": self.name, "description": self.description, "input_schema": self.parameters}
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


def tool_definitions(format: str = "openai") -> list[dict]:
    if format not in FORMATS:
        raise ValueError(f"Unknown format {format!r}: use one of {', '.join(FORMATS)}.")
    return [tool.definition(format) for tool in TOOLS.values()]


def tool_call(
    *,
    tenant: Tenant,
    user_id: str,
    name: str,
    arguments,
    agent_id: str = "",
    actor: str,
    scopes: Collection[str] = ALL_SCOPES,
) -> ToolResult:
    """Run one tool for `user_id` of `tenant`, if the caller's `scopes` allow it. `arguments` is an object or a JSON
    string (OpenAI hands them over as one). Every problem with the call comes back as an error result, never as an
    exception."""
    tool = TOOLS.get(name)
    if tool is None:
        return _error(f"Unknown tool {name!r}. The tools are: {', '.join(TOOLS)}.")
    if tool.scope not in scopes:
        return _error(f"This API key lacks the {tool.scope!r} scope that {name} needs; it may not change memory.")
    try:
        validate_user_id(user_id)
        if len(agent_id) > MAX_AGENT_ID_CHARS:
            raise ToolError(f"agent_id: must be at most {MAX_AGENT_ID_CHARS} characters.")
        values = _arguments(tool, arguments)
        return tool.handler(Caller(tenant=tenant, user_id=user_id, agent_id=agent_id, actor=actor), values)
    except ToolError as exc:
        return _error(str(exc))
    except ValidationError as exc:
        return _error(_validation_message(exc))
    except ApplicationError as exc:  # a rule of the service said no (the embedding provider's outage included)
        return _error(exc.message)
    except Http404:
        return _error("Not found.")


def _error(message: str) -> ToolResult:
    return ToolResult(content=f"Error: {message}", data=None, is_error=True)


def _arguments(tool: Tool, arguments) -> dict:
    """The call's arguments, checked against the tool's schema (and for what PostgreSQL cannot store)."""
    if arguments is None or arguments == "":
        arguments = {}
    if isinstance(arguments, str):
        try:
            arguments = strict_json.loads(arguments, parse_constant=strict_json.strict_constant)
        except (ValueError, RecursionError) as exc:
            raise ToolError(f"The arguments of {tool.name} are not valid JSON: {exc}") from None
    if not isinstance(arguments, dict):
        raise ToolError(f"The arguments of {tool.name} must be a JSON object, not {_json_type(arguments)}.")
    json_problem_check(arguments)  # NUL and lone surrogates, too deep: an ApplicationError naming the place
    errors = sorted(_VALIDATORS[tool.name].iter_errors(arguments), key=lambda error: list(error.absolute_path))
    if errors:
        problems = "; ".join(_schema_error(error) for error in errors)
        raise ToolError(f"Invalid arguments for {tool.name}: {problems}.")
    for key, value in arguments.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise ToolError(f"Invalid arguments for {tool.name}: {key}: must be a finite number.")
    return arguments


def _schema_error(error: jsonschema.ValidationError) -> str:
    path = ".".join(str(part) for part in error.absolute_path)
    return f"{path}: {error.message}" if path else error.message


def _json_type(value) -> str:
    return {list: "an array", bool: "a boolean", int: "a number", float: "a number"}.get(type(value), "a string")


def _validation_message(exc: ValidationError) -> str:
    if hasattr(exc, "error_dict"):
        return "; ".join(f"{field}: {' '.join(messages)}" for field, messages in exc.message_dict.items())
    return " ".join(exc.messages)


# --- presenting -----------------------------------------------------------------------------------------------------


def _fact_data(fact: Fact) -> dict:
    return {
        "id": fact.pk,
        "content": fact.content,
        "category": fact.category,
        "confidence": fact.confidence,
        "pinned": fact.pinned,
        "status": fact.status,
        "agent_id": fact.agent_id,
        "valid_from": fact.valid_from.isoformat(),
        "valid_to": fact.valid_to.isoformat() if fact.valid_to else None,
        "usage_count": fact.usage_count,
    }


def _fact_line(number: int, fact: Fact) -> str:
    marks = ", pinned" if fact.pinned else ""
    content = neutralised(fact.content)
    return f"{number}. [fact {fact.pk}{marks}] {content} ({fact.category}, since {fact.valid_from:%Y-%m-%d})"


DEGRADED_NOTE = "(Ranked by keywords alone: the embedding model is unavailable right now.)"


# --- the handlers ---------------------------------------------------------------------------------------------------


def _users_fact(caller: Caller, fact_id: int) -> Fact:
    """The fact, if it is this user's (of this tenant, and of the caller's agent when one is named)."""
    fact = fact_selectors.fact_of_user(
        tenant=caller.tenant, user_id=caller.user_id, fact_id=fact_id, agent_id=caller.agent_id or None
    )
    if fact is None:
        raise ToolError(f"Fact {fact_id} not found for this user.")
    return fact


def memory_add(caller: Caller, arguments: dict) -> ToolResult:
    result = fact_services.fact_remember(
        tenant=caller.tenant,
        user_id=caller.user_id,
        content=arguments["content"],
        category=arguments.get("category", Fact.Category.OTHER),
        confidence=arguments.get("confidence", 1.0),
        pinned=arguments.get("pinned", False),
        agent_id=caller.agent_id,
        source=Fact.Source.AGENT,
        actor=caller.actor,
    )
    fact = result.fact
    content = {
        "created": f"Saved as fact {fact.pk}.",
        "merged": f"Already known: merged into fact {fact.pk} ({fact.content}).",
        "superseded": f"Saved as fact {fact.pk}; it replaces fact {_ids(result.superseded_ids)}, which is kept in the "
        "history as no longer current.",
        "pending": f"Saved as fact {fact.pk}; it waits for review before it is used"
        + (" (it reads as instructions to an assistant)." if fact.hold_reason else "."),
        "conflict": f"Saved as fact {fact.pk}; it contradicts what is stored (conflict {_ids(result.conflict_ids)}) "
        "and waits for review before it is used.",
    }[result.outcome]
    data = {
        "outcome": result.outcome,
        "fact": _fact_data(fact),
        "superseded_ids": result.superseded_ids,
        "conflict_ids": result.conflict_ids,
    }
    return ToolResult(content=content, data=data)


def _ids(ids: list[int]) -> str:
    return ", ".join(str(pk) for pk in ids)


UPDATE_FIELDS = ("content", "category", "confidence", "pinned")


def memory_update(caller: Caller, arguments: dict) -> ToolResult:
    fact_id = arguments["fact_id"]
    changes = {name: arguments[name] for name in UPDATE_FIELDS if name in arguments}
    if not changes:
        raise ToolError(f"memory_update needs at least one of {', '.join(UPDATE_FIELDS)} to change.")
    _users_fact(caller, fact_id)  # user_id never changes, so a fact found here stays this user's
    fact = fact_services.fact_update(tenant=caller.tenant, fact_id=fact_id, actor=caller.actor, **changes)
    return ToolResult(content=f"Updated fact {fact.pk}: {fact.content}", data={"fact": _fact_data(fact)})


def memory_delete(caller: Caller, arguments: dict) -> ToolResult:
    fact_id = arguments["fact_id"]
    _users_fact(caller, fact_id)
    fact_services.fact_delete(tenant=caller.tenant, fact_id=fact_id, actor=caller.actor)
    return ToolResult(content=f"Deleted fact {fact_id}.", data={"deleted": [fact_id]})


def memory_search(caller: Caller, arguments: dict) -> ToolResult:
    query = arguments["query"]
    try:
        validate_visible_text(query)
    except ValidationError:
        raise ToolError("query: must contain visible characters.") from None
    found = fact_selectors.facts_search_answer(
        tenant=caller.tenant,
        user_id=caller.user_id,
        query=query,
        limit=arguments.get("limit", 5),
        agent_id=caller.agent_id or None,
        filters=fact_selectors.fact_filters_parse(arguments["filters"]) if "filters" in arguments else None,
    )
    # What the model is shown counts as a use, as for the facts /context injects: they live longer for it.
    fact_services.facts_record_usage(tenant=caller.tenant, fact_ids=[hit.fact.pk for hit in found.results])
    results = [
        {
            "id": hit.fact.pk,
            "content": hit.fact.content,
            "category": hit.fact.category,
            "score": hit.score,
            "valid_from": hit.fact.valid_from.isoformat(),
        }
        for hit in found.results
    ]
    if found.results:
        lines = [f"Found {len(results)} fact(s) about this user:"]
        lines += block(MEMORY_TAG, MEMORY_NOTE, [_fact_line(n, hit.fact) for n, hit in enumerate(found.results, 1)])
    else:
        lines = ["No stored fact about this user matches."]
    if found.degraded:
        lines.append(DEGRADED_NOTE)
    return ToolResult(content="\n".join(lines), data={"results": results, "degraded": found.degraded})


def memory_load(caller: Caller, arguments: dict) -> ToolResult:
    # Not counted as a use: a load happens at every conversation's start whatever it is about, and counting it
    # would keep whatever it returns alive and on top for ever (the ranking reads usage_count).
    facts = fact_selectors.facts_most_important(
        tenant=caller.tenant,
        user_id=caller.user_id,
        limit=arguments.get("limit", 20),
        agent_id=caller.agent_id or None,
    )
    if facts:
        lines = ["What you know about this user, most important first:"]
        lines += block(MEMORY_TAG, MEMORY_NOTE, [_fact_line(number, fact) for number, fact in enumerate(facts, 1)])
    else:
        lines = ["Nothing is stored about this user yet."]
    return ToolResult(content="\n".join(lines), data={"facts": [_fact_data(fact) for fact in facts]})


def memory_clear(caller: Caller, arguments: dict) -> ToolResult:
    if arguments["confirm"] is not True:
        raise ToolError(
            "memory_clear deletes every fact of this user and needs confirm: true. Call it only when the user has "
            "explicitly asked to forget everything."
        )
    deleted = fact_services.facts_delete_of_user(
        tenant=caller.tenant, user_id=caller.user_id, agent_id=caller.agent_id or None, actor=caller.actor
    )
    content = f"Deleted all {len(deleted)} fact(s) of this user." if deleted else "There was nothing to delete."
    return ToolResult(content=content, data={"deleted_count": len(deleted)})


def kb_search(caller: Caller, arguments: dict) -> ToolResult:
    query = arguments["query"]
    try:
        validate_visible_text(query)
    except ValidationError:
        raise ToolError("query: must contain visible characters.") from None
    found = kb_search_answer(tenant=caller.tenant, query=query, limit=arguments.get("limit", 5))
    results = [
        {
            "document_id": hit.document_id,
            "doc_id": hit.doc_id,
            "heading_path": hit.heading_path,
            "line_start": hit.line_start,
            "line_end": hit.line_end,
            "citation": hit.citation,
            "text": hit.text,
            "score": hit.score,
        }
        for hit in found.results
    ]
    if found.results:
        passages = []
        for number, hit in enumerate(found.results, 1):
            passages += [f"{number}. [{hit.citation}]", neutralised(hit.text.strip(), keep_headings=True)]
        lines = [
            f"Found {len(results)} passage(s) in the knowledge base:",
            *block(DOCUMENTS_TAG, DOCUMENTS_NOTE, passages),
        ]
    else:
        lines = ["No passage of the knowledge base matches."]
    if found.degraded:
        lines.append(DEGRADED_NOTE)
    return ToolResult(content="\n".join(lines), data={"results": results, "degraded": found.degraded})


# --- the registry ---------------------------------------------------------------------------------------------------


def _object(properties: dict, required: list[str] | None = None) -> dict:
    return {"type": "object", "properties": properties, "required": required or [], "additionalProperties": False}


def _limit(default: int, maximum: int, what: str) -> dict:
    return {
        "type": "integer",
        "minimum": 1,
        "maximum": maximum,
        "default": default,
        "description": f"How many {what} to return at most (default {default}).",
    }


_FACT_ID = {"type": "integer", "minimum": 1, "maximum": MAX_FACT_ID, "description": "The fact's id, as shown [fact N]."}
_CATEGORY = {
    "type": "string",
    "enum": Fact.Category.values,
    "description": "preference (likes, dislikes, how they want things done), profile (who they are: name, role, "
    "location), project (what they work on), decision (what was decided and why), procedure (how they do a "
    "recurring task), other.",
}
_CONFIDENCE = {
    "type": "number",
    "minimum": 0,
    "maximum": 1,
    "description": "How sure you are, 0 to 1 (default 1). Below the service's auto-approve threshold the fact waits "
    "for review.",
}
_PINNED = {"type": "boolean", "description": "Evergreen: never decays, never forgotten, loaded first."}
_QUERY = {"type": "string", "minLength": 1, "maxLength": 4000, "description": "What you want to know, in words."}
_FILTERS = {
    "type": "object",
    "description": (
        'Only facts matching this filter, e.g. {"category": "preference"}, {"metadata.project": "atlas"}, '
        '{"created_at": {"gte": "2024-05-01T00:00:00Z"}}, combined with {"AND": [...]}, {"OR": [...]}, {"NOT": ...}. '
        "Fields: category, agent_id, source, status, pinned, confidence, usage_count, created_at, updated_at, "
        "occurred_at, last_used_at, id, content, metadata.<key>; operators: eq, ne, in, nin, gt, gte, lt, lte, "
        "contains, icontains, exists."
    ),
}

_TOOL_LIST = [
    Tool(
        name="memory_add",
        description=(
            "Save one durable fact about the user to long-term memory: a preference, a decision and its reason, a "
            "profile fact (name, role, location, constraints), a project, a procedure they follow. Call it when "
            "the user tells you something that will still matter in a later conversation. Do not save chit-chat, "
            "one-off requests, what you said yourself, or facts you already found with memory_search (update "
            'those instead). One atomic statement per call, in the third person ("Prefers PostgreSQL for new '
            'projects"). Duplicates are merged and contradicted facts retired by the service.'
        ),
        parameters=_object(
            {
                "content": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": settings.FACTS_MAX_CONTENT_CHARS,
                    "description": "The fact, one self-contained sentence.",
                },
                "category": _CATEGORY,
                "confidence": _CONFIDENCE,
                "pinned": _PINNED,
            },
            ["content"],
        ),
        handler=memory_add,
        scope=MEMORY_WRITE,
    ),
    Tool(
        name="memory_update",
        description=(
            "Correct or refine a stored fact about the user, by its id (from memory_search or memory_load): when "
            "the user corrects something you know, or a fact changed (a new job, a new preference). Give only the "
            "fields that change. The previous version stays in the fact's history."
        ),
        parameters=_object(
            {
                "fact_id": _FACT_ID,
                "content": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": settings.FACTS_MAX_CONTENT_CHARS,
                    "description": "The corrected fact.",
                },
                "category": _CATEGORY,
                "confidence": _CONFIDENCE,
                "pinned": _PINNED,
            },
            ["fact_id"],
        ),
        handler=memory_update,
        scope=MEMORY_WRITE,
    ),
    Tool(
        name="memory_delete",
        description=(
            "Delete one stored fact about the user, by its id: when the user asks you to forget that one thing, "
            "or it is plainly wrong and cannot be corrected with memory_update."
        ),
        parameters=_object({"fact_id": _FACT_ID}, ["fact_id"]),
        handler=memory_delete,
        scope=MEMORY_WRITE,
    ),
    Tool(
        name="memory_search",
        description=(
            "Search long-term memory for what you know about the user: call it before answering anything that "
            "depends on their past, preferences, decisions, projects or personal details, and before saving a "
            "fact, to update it rather than save it twice. Returns the best matching facts with their ids."
        ),
        parameters=_object({"query": _QUERY, "limit": _limit(5, 50, "facts"), "filters": _FILTERS}, ["query"]),
        handler=memory_search,
    ),
    Tool(
        name="memory_load",
        description=(
            "Load the user's most important current facts (pinned first, then the ones their conversations use "
            "most, recent first): call it once at the start of a conversation, when you know nothing about the "
            "user yet. For a specific question use memory_search."
        ),
        parameters=_object({"limit": _limit(20, 100, "facts")}),
        handler=memory_load,
    ),
    Tool(
        name="memory_clear",
        description=(
            "Delete every stored fact about the user. Only when the user explicitly asks you to forget everything "
            "about them; never to tidy up or on your own initiative. Needs confirm: true."
        ),
        parameters=_object(
            {"confirm": {"type": "boolean", "description": "Must be true: the user asked to forget everything."}},
            ["confirm"],
        ),
        handler=memory_clear,
        scope=MEMORY_WRITE,
    ),
    Tool(
        name="kb_search",
        description=(
            "Search the organisation's knowledge base (documentation, runbooks, policies shared by all users): "
            "call it before answering a question about how things are done here, a product or an internal "
            "process. Returns passages with citations to quote. For what you know about the user, use "
            "memory_search."
        ),
        parameters=_object({"query": _QUERY, "limit": _limit(5, 20, "passages")}, ["query"]),
        handler=kb_search,
    ),
]
TOOLS: dict[str, Tool] = {tool.name: tool for tool in _TOOL_LIST}
_VALIDATORS = {tool.name: jsonschema.Draft202012Validator(tool.parameters) for tool in _TOOL_LIST}
