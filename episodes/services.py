"""Writes to episodic memory: store a session's messages (only what is new), and in the background extract facts
from the messages not extracted yet, then refresh the summary and its embedding."""

import logging
import math
import re
from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils import timezone
from django_q.conf import Conf
from django_q.tasks import async_task

from ai.chat import get_chat
from ai.errors import AIProviderError
from ai.services import active_embedding_model, embed_query
from core.errors import ApplicationError
from core.locks import LockNamespace, is_locked, session_lock
from core.text import STOP_WORDS
from core.timestamps import parse_timestamp, timestamp_text
from core.validation import validate_identifier, validate_user_id
from facts.services import facts_extract
from tenancy.models import Tenant

from .models import Episode

logger = logging.getLogger(__name__)

ROLES = ("user", "assistant", "system", "tool")
EXTRACT_TASK = "episodes.tasks.episode_extract"
Status = Episode.ExtractionStatus


@dataclass(frozen=True)
class StoreResult:
    episode: Episode
    created: bool
    appended: int  # messages added by this request (0: everything posted was already stored)


# --- validation ---------------------------------------------------------------------------------


def _too_large(message: str, field: str) -> ApplicationError:
    return ApplicationError(message, code="too_large", status_code=413, details={field: [message]})


def clean_messages(messages) -> list[dict]:
    """Posted messages as stored: {"role", "content", "timestamp" (ISO 8601 in UTC, or None)}.

    Raises ValidationError (400) naming the message index, or ApplicationError 413 over a size limit."""
    if not isinstance(messages, list) or not messages:
        raise ValidationError({"messages": "Must be a non-empty list of messages."})
    limit = settings.EPISODES_MAX_MESSAGES_PER_REQUEST
    if len(messages) > limit:
        raise _too_large(
            f"Too many messages in one request: {len(messages)}, at most {limit} "
            "(EPISODES_MAX_MESSAGES_PER_REQUEST). Post the session in parts: stored messages are skipped.",
            "messages",
        )
    cleaned = []
    for index, message in enumerate(messages):
        field = f"messages[{index}]"
        if not isinstance(message, dict):
            raise ValidationError({field: "Must be an object with role and content."})
        if message.get("role") not in ROLES:
            raise ValidationError({f"{field}.role": f"Must be one of {', '.join(ROLES)}."})
        content = message.get("content")
        if not isinstance(content, str) or not content.strip():
            raise ValidationError({f"{field}.content": "Must be a non-empty string."})
        if len(content) > settings.EPISODES_MAX_MESSAGE_CHARS:
            raise _too_large(
                f"{field}.content has {len(content)} characters, at most {settings.EPISODES_MAX_MESSAGE_CHARS} "
                "(EPISODES_MAX_MESSAGE_CHARS).",
                f"{field}.content",
            )
        timestamp = parse_timestamp(message.get("timestamp"), field=f"{field}.timestamp")
        cleaned.append(
            {"role": message["role"], "content": content, "timestamp": timestamp and timestamp_text(timestamp)}
        )
    return cleaned


def _time_of(message: dict) -> datetime | None:
    return parse_timestamp(message.get("timestamp"), field="timestamp")


# --- which posted messages are new ---------------------------------------------------------------


def _same(a: dict, b: dict) -> bool:
    """One message, posted twice: same role and content, and the same timestamp when both carry one."""
    if a["role"] != b["role"] or a["content"] != b["content"]:
        return False
    return a.get("timestamp") is None or b.get("timestamp") is None or a["timestamp"] == b["timestamp"]


def _all_same(left: list[dict], right: list[dict]) -> bool:
    return len(left) == len(right) and all(_same(a, b) for a, b in zip(left, right, strict=True))


def new_messages(stored: list[dict], posted: list[dict]) -> list[dict]:
    """The posted messages that are not stored yet.

    - The posted list is the session so far, or an earlier snapshot of it: what matches the stored messages
      from the start is skipped, the rest appended.
    - The posted list holds only the latest turns: the longest run at its start that repeats the end of the
      stored session is skipped (a retried post adds nothing), the rest appended.

    System messages take no part in the matching: agents often rewrite their system prompt every turn (the date,
    the memory context), and the session is the same session. A system message is stored when it comes after
    the point where the posted list joins the stored session.
    """
    posted_said = [index for index, message in enumerate(posted) if message["role"] != "system"]
    if not posted_said:  # system messages alone: those not stored yet
        return [message for message in posted if not any(_same(message, known) for known in stored)]
    said = [message for message in stored if message["role"] != "system"]
    known = _already_stored(said, [posted[index] for index in posted_said])
    return posted[posted_said[known - 1] + 1 :] if known else posted


def _already_stored(stored: list[dict], posted: list[dict]) -> int:
    """How many messages at the start of `posted` are already in `stored`, by the rules of new_messages."""
    if _all_same(stored[: len(posted)], posted):
        return len(posted)  # the same session again, or an earlier snapshot of it
    for overlap in range(min(len(stored), len(posted)), 0, -1):
        if _same(stored[-overlap], posted[0]) and _all_same(stored[-overlap:], posted[:overlap]):
            return overlap
    return 0


def _with_range(ranges: list[list[int]], start: int, end: int) -> list[list[int]]:
    """Add [start, end) to sorted, non-overlapping ranges, merging a range that ends where this one starts."""
    if ranges and ranges[-1][1] == start:
        return [*ranges[:-1], [ranges[-1][0], end]]
    return [*ranges, [start, end]]


def _excluded(index: int, ranges: list[list[int]]) -> bool:
    return any(start <= index < end for start, end in ranges)


# --- store --------------------------------------------------------------------------------------


# What a post changes; the rest (watermark, summary, vector) belongs to the background run.
STORE_FIELDS = [
    "messages", "message_count", "extraction_excluded", "agent_id", "last_message_at", "extraction_status",
    "extraction_error", "extraction_skip_reason", "extraction_attempts", "search_text", "updated_at",
]  # fmt: skip


def episode_store(
    *,
    tenant: Tenant,
    user_id: str,
    session_id: str,
    messages: list[dict],
    agent_id: str = "",
    extract: bool = True,
) -> StoreResult:
    """Keep a session's messages verbatim, appending only those not stored yet (see new_messages), and queue
    the background extraction after commit. extract=False keeps this request's messages out of fact extraction
    (they are still stored, summarised and searchable). All or nothing: over a limit, nothing is stored."""
    user_id = validate_user_id(user_id)
    session_id = validate_identifier(session_id, field="session_id")
    agent_id = agent_id or ""
    posted = clean_messages(messages)
    now = timezone.now()

    with transaction.atomic():
        # get_or_create is safe under concurrency: a racing insert of the same session hits the unique constraint,
        # then the committed row is read (and locked) instead.
        episode, created = Episode.objects.select_for_update().get_or_create(
            tenant=tenant, user_id=user_id, session_id=session_id, defaults={"agent_id": agent_id}
        )
        new = new_messages(episode.messages, posted)
        if not new:
            return StoreResult(episode, created, 0)
        total = sum(len(message["content"]) for message in [*episode.messages, *new])
        if total > settings.EPISODES_MAX_EPISODE_CHARS:
            raise _too_large(
                f"The episode would hold {total} characters, at most {settings.EPISODES_MAX_EPISODE_CHARS} "
                "(EPISODES_MAX_EPISODE_CHARS). Start a new session_id.",
                "messages",
            )
        start = len(episode.messages)
        episode.messages = [*episode.messages, *new]
        episode.message_count = len(episode.messages)
        if not extract:
            episode.extraction_excluded = _with_range(episode.extraction_excluded, start, episode.message_count)
        episode.agent_id = episode.agent_id or agent_id
        times = [_time_of(message) or now for message in new]
        episode.last_message_at = max([*times, episode.last_message_at] if episode.last_message_at else times)
        episode.extraction_status = Status.PENDING
        episode.extraction_error = episode.extraction_skip_reason = ""
        episode.extraction_attempts = 0  # new messages, new budget of attempts
        episode.refresh_search_text()
        episode.full_clean(
            exclude=["tenant", "messages", "embedding", "extraction_excluded"],
            validate_unique=False,
            validate_constraints=False,
        )
        episode.save(update_fields=STORE_FIELDS)
        _enqueue_after_commit(episode.pk)
    return StoreResult(episode, created, len(new))


def _enqueue_after_commit(episode_id: int) -> None:
    """Queue the extraction once the messages are committed (the task must see them). Robust: the messages are
    stored either way, and a lost task is what POST /episodes/{id}/retry is for."""
    transaction.on_commit(lambda: _enqueue(episode_id), robust=True)


def _enqueue(episode_id: int) -> None:
    def enqueue():
        async_task(EXTRACT_TASK, episode_id, task_name=f"episode_extract-{episode_id}", group="episodes")

    if Conf.SYNC:  # the task runs right here (tests): its own transactions must not be nested in ours
        enqueue()
        return
    # Outside a transaction the ORM broker first closes "old" connections, which with CONN_MAX_AGE=0 means a new
    # database connection for every post.
    with transaction.atomic():
        enqueue()


def episode_retry(*, tenant: Tenant, episode_id: int) -> Episode:
    """Queue the extraction again, with a fresh budget of attempts: for a failed episode, one whose run died
    (running, but no live run holds it), or one still pending (its task may have been lost)."""
    with transaction.atomic():
        try:
            episode = (
                Episode.objects.select_for_update().defer("messages", "search_text").get(tenant=tenant, pk=episode_id)
            )
        except Episode.DoesNotExist:
            raise ApplicationError("Episode not found.", code="not_found", status_code=404) from None
        status = episode.extraction_status
        running = status == Status.RUNNING and is_locked(LockNamespace.EPISODE_EXTRACTION, episode.pk)
        if status in (Status.DONE, Status.SKIPPED) or running:
            raise ApplicationError(
                f"Only a failed or stalled extraction can be retried; this one is {status}.",
                code="conflict",
                status_code=409,
            )
        episode.extraction_status, episode.extraction_error, episode.extraction_attempts = Status.PENDING, "", 0
        episode.save(update_fields=["extraction_status", "extraction_error", "extraction_attempts", "updated_at"])
        _enqueue_after_commit(episode.pk)
    return episode


# --- background extraction ----------------------------------------------------------------------


def episode_extract(*, episode_id: int) -> str:
    """The background run (django-q task): extract facts from the messages past the watermark, then refresh the
    summary and its embedding. Returns the resulting status.

    Idempotent: facts and the watermark are written in one transaction, so a re-run never extracts a message
    twice and a run that dies mid-way writes nothing. Runs of one episode are serialised. A failure is recorded
    on the episode (status failed, the error kept) and re-raised, so django-q retries, until
    EPISODES_EXTRACTION_MAX_ATTEMPTS runs have failed; then the episode stays failed until retried.
    """
    # Held across the run's transactions (released if the process dies), so runs of one episode never overlap.
    with session_lock(LockNamespace.EPISODE_EXTRACTION, episode_id):
        message_count = _claim(episode_id)
        if message_count is None:
            return "up to date"
        try:
            episode, skip_reason = _extract_pending(episode_id, message_count)
            summary = _summary_of(episode, message_count)
        except Exception as exc:
            if _record_failure(episode_id, exc):
                raise
            return Status.FAILED
        return _finish(episode_id, message_count, skip_reason, summary)


def _claim(episode_id: int) -> int | None:
    """Mark the episode running (one attempt more) and return how many messages this run covers; None when there
    is nothing to do: deleted, already up to date, or failed with no attempts left. One statement, committed at
    once, so readers see "running" during the run."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            """
            UPDATE episodes_episode
            SET extraction_status = %(running)s, extraction_attempts = extraction_attempts + 1
            WHERE id = %(id)s AND CASE WHEN extraction_status = %(failed)s THEN extraction_attempts < %(max)s
                                       ELSE summarized_message_count < message_count END
            RETURNING message_count
            """,
            {
                "id": episode_id,
                "running": Status.RUNNING,
                "failed": Status.FAILED,
                "max": settings.EPISODES_EXTRACTION_MAX_ATTEMPTS,
            },
        )
        row = cursor.fetchone()
    return row[0] if row else None


def _extract_pending(episode_id: int, message_count: int) -> tuple[Episode, str]:
    """Extract facts from messages [watermark, message_count) and move the watermark, in one transaction.
    Returns the episode as read and why extraction was skipped ("" when it was not)."""
    with transaction.atomic():
        # No row lock: a post appending to this session must not wait for the chat model.
        episode = Episode.objects.select_related("tenant").defer("search_text", "embedding").get(pk=episode_id)
        start = episode.extracted_message_count
        if start >= message_count:
            return episode, ""
        messages = episode.messages[:message_count]
        user_chars = _user_chars(messages)
        if user_chars < settings.EPISODES_EXTRACT_MIN_USER_CHARS:
            # The watermark stays: once the session grows past the threshold, all of it is extracted.
            return episode, (
                f"Too short to extract facts from: {user_chars} characters from the user, fewer than "
                f"{settings.EPISODES_EXTRACT_MIN_USER_CHARS} (EPISODES_EXTRACT_MIN_USER_CHARS)."
            )
        pending = [
            message
            for index, message in enumerate(messages[start:], start=start)
            if not _excluded(index, episode.extraction_excluded)
        ]
        skip_reason = "" if pending else "Extraction was switched off for the new messages (extract=false)."
        # Facts are about the user: a batch without a user message (an assistant reply alone) has none to give.
        if any(message["role"] == "user" for message in pending):
            facts_extract(
                tenant=episode.tenant,
                user_id=episode.user_id,
                messages=pending,
                reference_time=_reference_time(pending, episode),
                episode=episode,
            )
        Episode.objects.filter(pk=episode_id).update(extracted_message_count=message_count)
        return episode, skip_reason


def _user_chars(messages: list[dict]) -> int:
    return sum(len(message["content"].strip()) for message in messages if message["role"] == "user")


def _reference_time(messages: list[dict], episode: Episode) -> datetime:
    """When it was said: the latest timestamp of these messages, else the episode's time."""
    times = [time for time in map(_time_of, messages) if time is not None]
    return max(times) if times else (episode.last_message_at or timezone.now())


@dataclass(frozen=True)
class _Summary:
    text: str
    vector: object  # the embedding of text, None for an empty summary
    model: str


def _summary_of(episode: Episode, message_count: int) -> _Summary | None:
    """The summary of the first `message_count` messages (stored messages never change: they are only appended
    to) and its embedding; None when the stored summary already covers them."""
    if episode.summarized_message_count >= message_count:
        return None
    text = episode_summary(episode, message_count=message_count)
    return _Summary(text, embed_query(text) if text else None, active_embedding_model() if text else "")


def _finish(episode_id: int, message_count: int, skip_reason: str, summary: _Summary | None) -> str:
    with transaction.atomic():
        current = Episode.objects.select_for_update().only("message_count", "summarized_message_count")
        current = current.get(pk=episode_id)
        changes = {"extraction_error": "", "extraction_skip_reason": skip_reason}
        # Only forward: an older run never overwrites the summary of a longer session.
        if summary is not None and current.summarized_message_count < message_count:
            changes |= {"summary": summary.text, "embedding": summary.vector, "embedding_model": summary.model}
            changes["summarized_message_count"] = message_count
        if current.message_count > message_count:
            changes["extraction_status"] = Status.PENDING  # messages arrived during the run; their task is queued
        else:
            changes["extraction_status"] = Status.SKIPPED if skip_reason else Status.DONE
        Episode.objects.filter(pk=episode_id).update(**changes)
    return changes["extraction_status"]


def _record_failure(episode_id: int, exc: Exception) -> bool:
    """Keep the error on the episode; True when attempts are left (the caller re-raises so django-q retries)."""
    message = exc.message if isinstance(exc, AIProviderError) else f"{type(exc).__name__}: {exc}"
    logger.warning("extraction of episode %s failed: %s", episode_id, message)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE episodes_episode SET extraction_status = %s, extraction_error = %s WHERE id = %s "
            "RETURNING extraction_attempts",
            [Status.FAILED, message[:4000], episode_id],
        )
        row = cursor.fetchone()
    return row is not None and row[0] < settings.EPISODES_EXTRACTION_MAX_ATTEMPTS


# --- summaries ----------------------------------------------------------------------------------

SUMMARY_SCHEMA = {
    "type": "object",
    "properties": {"summary": {"type": "string"}},
    "required": ["summary"],
}

SUMMARY_SYSTEM = """You write the summary a long-term memory keeps of a conversation between a user and an
assistant, so that a future assistant can recall it. Say what the user talked about, what they said about
themselves, what was decided or planned (with absolute dates, resolved against the message times) and what is
still open. Plain prose in the third person ("The user ..."), in the language of the conversation, at most
WORDS words. When a summary of the earlier part is given, return one summary of the whole conversation."""


def episode_summary(episode: Episode, *, message_count: int) -> str:
    """The summary of the first `message_count` messages: by the chat model (building on the previous summary)
    when one is configured and the session is worth it, else extractive. The chat model failing falls back to
    the extractive summary: episodic memory keeps working while the model is down."""
    messages = episode.messages[:message_count]
    chat = get_chat()
    if chat is None or _user_chars(messages) < settings.EPISODES_EXTRACT_MIN_USER_CHARS:
        return summary_extractive(messages)
    previous = episode.summary if 0 < episode.summarized_message_count <= message_count else ""
    new = messages[episode.summarized_message_count :] if previous else messages
    try:
        answer = chat.complete_json(
            system=SUMMARY_SYSTEM.replace("WORDS", str(settings.EPISODES_SUMMARY_MAX_CHARS // 6)),
            user=f"Summary of the earlier part:\n{previous or '(none)'}\n\nMessages:\n{_transcript(new)}",
            schema=SUMMARY_SCHEMA,
            schema_name="episode_summary",
        )
    except AIProviderError as exc:
        logger.warning("chat summary unavailable, summarising extractively: %s", exc.message)
        return summary_extractive(messages)
    return _shorten(" ".join(answer["summary"].split()), settings.EPISODES_SUMMARY_MAX_CHARS) or summary_extractive(
        messages
    )


def _transcript(messages: list[dict]) -> str:
    """The newest messages that fit EPISODES_SUMMARY_INPUT_MAX_CHARS, one line each."""
    lines, size = [], 0
    for message in reversed(messages):
        stamp = f"[{message['timestamp']}] " if message.get("timestamp") else ""
        line = f"{stamp}{message['role']}: {message['content']}"
        if size + len(line) > settings.EPISODES_SUMMARY_INPUT_MAX_CHARS and lines:
            lines.append(f"({len(messages) - len(lines)} earlier messages left out)")
            break
        lines.append(line[: settings.EPISODES_SUMMARY_INPUT_MAX_CHARS])
        size += len(line)
    return "\n".join(reversed(lines))


_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")
_WORD = re.compile(r"[^\W_]+")


def summary_extractive(messages: list[dict], max_chars: int | None = None) -> str:
    """An offline summary: the first substantial sentence of the user, then the most informative sentences of
    the conversation (rich in words the conversation keeps coming back to, names and numbers), in the order
    they were said, within `max_chars`."""
    max_chars = max_chars or settings.EPISODES_SUMMARY_MAX_CHARS
    sentences: list[tuple[str, str]] = []  # (role, sentence)
    for message in messages:
        if message["role"] in ("user", "assistant"):
            sentences += [
                (message["role"], " ".join(part.split()))
                for part in _SENTENCE_BREAK.split(message["content"])
                if part.strip()
            ]
    if not sentences:
        return ""
    words = [
        [word for word in _WORD.findall(text.lower()) if len(word) > 2 and word not in STOP_WORDS]
        for _, text in sentences
    ]
    spread = Counter(word for sentence_words in words for word in set(sentence_words))

    def score(index: int) -> float:
        distinct = set(words[index])
        if len(distinct) < 4:
            return 0.0  # greetings, thanks and one-line reactions say nothing about the conversation
        text = sentences[index][1]
        value = sum(math.log(1 + spread[word]) for word in distinct) / math.sqrt(len(words[index]))
        value += 0.5 * len(re.findall(r"(?<=\w )[A-Z][a-z]+|\d+", text))  # names and numbers mid-sentence
        return value * (0.6 if text.endswith("?") else 1.0)

    scores = [score(index) for index in range(len(sentences))]
    user_indexes = [index for index, (role, _) in enumerate(sentences) if role == "user"]
    opening = next((index for index in user_indexes if scores[index] > 0), user_indexes[0] if user_indexes else 0)
    chosen = {opening: _shorten(sentences[opening][1], max_chars // 2)}
    left = max_chars - len(chosen[opening])
    for index in sorted(range(len(sentences)), key=lambda i: (-scores[i], i)):
        text = sentences[index][1]
        if index in chosen or scores[index] <= 0 or len(text) + 1 > left:
            continue
        chosen[index] = text
        left -= len(text) + 1
    return " ".join(chosen[index] for index in sorted(chosen))


def _shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0] if " " in text[: limit - 1] else text[: limit - 1]
    return cut.rstrip(" ,;:") + "…"


# --- erasure ------------------------------------------------------------------------------------


def episodes_erase_user(*, tenant: Tenant, user_id: str) -> list[int]:
    """Delete every episode of one user (part of the user's erasure; the caller holds the transaction). Returns
    their ids."""
    episodes = Episode.objects.filter(tenant=tenant, user_id=user_id)
    ids = list(episodes.values_list("pk", flat=True))
    episodes.delete()
    return ids
