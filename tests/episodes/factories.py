"""Conversations for episode tests."""

from episodes.models import EpisodeMessage

TURN_1 = [
    {"role": "user", "content": "I live in Berlin and I prefer PostgreSQL for new projects.",
     "timestamp": "2023-05-08T13:56:00Z"},
    {"role": "assistant", "content": "Noted, Berlin and PostgreSQL it is.", "timestamp": "2023-05-08T13:56:05Z"},
]  # fmt: skip
TURN_2 = [
    {"role": "user", "content": "I prefer green tea in the morning.", "timestamp": "2023-05-08T14:01:00Z"},
    {"role": "assistant", "content": "Green tea, good choice.", "timestamp": "2023-05-08T14:01:03Z"},
]


def conversation(session_id: str = "s1", messages=None, user_id: str = "u1", **fields) -> dict:
    return {"user_id": user_id, "session_id": session_id, "messages": messages or TURN_1, **fields}


def stored(episode) -> list[dict]:
    """The episode's stored messages, in order, as posted."""
    return [row.as_dict() for row in EpisodeMessage.objects.filter(episode=episode).order_by("position")]
