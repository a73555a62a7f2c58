"""Episode summaries: by the chat model when one is configured, else extractive (offline)."""

import logging
import math
import re
from collections import Counter
from typing import ClassVar

from django.conf import settings

from ai.chat import ChatAnswer, get_chat
from ai.errors import AIProviderError
from core.text import STOP_WORDS

from .messages import user_chars
from .models import Episode

logger = logging.getLogger(__name__)


class EpisodeSummary(ChatAnswer):
    schema_name: ClassVar[str] = "episode_summary"

    summary: str


SUMMARY_SYSTEM = """You write the summary a long-term memory keeps of a conversation between a user and an
assistant, so that a future assistant can recall it. Say what the user talked about, what they said about
themselves, what was decided or planned (with absolute dates, resolved against the message times) and what is
still open. Plain prose in the third person ("The user ..."), in the language of the conversation, at most
WORDS words. When a summary of the earlier part is given, return one summary of the whole conversation."""


def episode_summary(episode: Episode, *, messages: list[dict]) -> str:
    """The summary of the episode's first messages (`messages`, from the first): by the chat model (building on
    the previous summary) when one is configured and the session is worth it, else extractive. The chat model
    failing falls back to the extractive summary: episodic memory keeps working while the model is down."""
    message_count = len(messages)
    chat = get_chat()
    if chat is None or user_chars(messages) < settings.EPISODES_EXTRACT_MIN_USER_CHARS:
        return summary_extractive(messages)
    previous = episode.summary if 0 < episode.summarized_message_count <= message_count else ""
    new = messages[episode.summarized_message_count :] if previous else messages
    try:
        answer = chat.complete_json(
            system=SUMMARY_SYSTEM.replace("WORDS", str(settings.EPISODES_SUMMARY_MAX_CHARS // 6)),
            user=f"Summary of the earlier part:\n{previous or '(none)'}\n\nMessages:\n{_transcript(new)}",
            answer=EpisodeSummary,
        )
    except AIProviderError as exc:
        logger.warning("chat summary unavailable, summarising extractively: %s", exc.message)
        return summary_extractive(messages)
    return _shorten(" ".join(answer.summary.split()), settings.EPISODES_SUMMARY_MAX_CHARS) or summary_extractive(
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
