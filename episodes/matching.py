"""Which posted messages are new: agents post the session so far, an earlier snapshot, or only the latest turns."""

from collections.abc import Callable


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
    said = [message for message in stored if message["role"] != "system"]
    window = said_count(posted)
    return new_after(
        posted=posted,
        head=lambda: said[:window],
        tail=lambda: said[-window:] if window else [],
        stored_system=lambda: [message for message in stored if message["role"] == "system"],
    )


def said_count(posted: list[dict]) -> int:
    """How many stored non-system messages the rules read from each end of the session: as many as were posted."""
    return sum(1 for message in posted if message["role"] != "system")


Stored = Callable[[], list[dict]]


def new_after(*, posted: list[dict], head: Stored, tail: Stored, stored_system: Stored) -> list[dict]:
    """new_messages() from the only stored messages it needs, each read when the rules get to it: the first and
    the last said_count(posted) non-system ones (head, tail; fewer when the session is shorter), and, for a post
    of system messages alone, the stored system messages that could equal them (stored_system)."""
    posted_said = [index for index, message in enumerate(posted) if message["role"] != "system"]
    if not posted_said:  # system messages alone: those not stored yet
        system = stored_system()
        return [message for message in posted if not any(_same(message, known) for known in system)]
    known = _already_stored(head, tail, [posted[index] for index in posted_said])
    return posted[posted_said[known - 1] + 1 :] if known else posted


def _already_stored(head: Stored, tail: Stored, posted: list[dict]) -> int:
    """How many messages at the start of `posted` are already stored, by the rules of new_messages."""
    if _all_same(head()[: len(posted)], posted):
        return len(posted)  # the same session again, or an earlier snapshot of it
    tail = tail()
    for overlap in range(min(len(tail), len(posted)), 0, -1):
        if _same(tail[-overlap], posted[0]) and _all_same(tail[-overlap:], posted[:overlap]):
            return overlap
    return 0


def with_range(ranges: list[list[int]], start: int, end: int) -> list[list[int]]:
    """Add [start, end) to sorted, non-overlapping ranges, merging a range that ends where this one starts."""
    if ranges and ranges[-1][1] == start:
        return [*ranges[:-1], [ranges[-1][0], end]]
    return [*ranges, [start, end]]


def excluded(index: int, ranges: list[list[int]]) -> bool:
    return any(start <= index < end for start, end in ranges)
