"""One user holding every kind of memory (for the export and import tests), and what its searches answer."""

import json
from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from episodes.extraction import episode_extract
from episodes.selectors import episodes_search
from episodes.services import episode_store
from facts.models import Fact, FactConflict, FactEvent
from facts.selectors import facts_search
from facts.services import fact_reject, fact_remember, facts_record_usage
from facts.services.transitions import conflict_open, fact_supersede

QUERIES = ["which database for new projects", "where does she live", "green tea", "nurse at the hospital", "Porto"]


@dataclass
class Memories:
    user_id: str
    facts: dict[str, Fact]
    conflict: FactConflict


def build_memories(tenant, user_id: str = "alice") -> Memories:
    """Facts of every status and validity (with history, usage, a pin, a proposal), a conflict, and two episodes whose
    extraction ran (so some facts name their source episode and messages)."""

    def remember(content, **fields):
        return fact_remember(tenant=tenant, user_id=user_id, content=content, **fields).fact

    database = remember("Prefers PostgreSQL for new projects", category="preference", confidence=0.9)
    facts_record_usage(tenant=tenant, fact_ids=[database.pk])
    facts_record_usage(tenant=tenant, fact_ids=[database.pk])
    allergy = remember("Is allergic to shellfish", category="profile", pinned=True)
    lisbon = remember("Lives in Lisbon", category="profile")
    porto = remember("Lives in Porto since last spring", category="profile")
    lisbon.refresh_from_db()
    if lisbon.superseded_by_id is None:  # the rules judge may have seen the move already
        fact_supersede(lisbon, porto, "moved", actor="test")
    pending = remember("Prefers MySQL for new projects", confidence=0.5)  # pending, with its proposal
    rejected = remember("Works night shifts every weekend", confidence=0.5)
    fact_reject(tenant=tenant, fact_id=rejected.pk, actor="test")
    archived = remember("Plays the cello on Sundays")
    Fact.objects.filter(pk=archived.pk).update(status=Fact.Status.ARCHIVED, archived_at=timezone.now())
    # The rules judge opens the conflict between the two databases; the test opens it where it does not.
    conflict = FactConflict.objects.filter(new_fact=pending).first() or conflict_open(
        database, pending, "which database", actor="test"
    )
    earlier = timezone.now() - timedelta(days=3)
    for session, messages in {
        "trip-1": [
            ("user", "I work as a nurse at the hospital in Porto and I drink green tea every morning."),
            ("assistant", "Noted: nurse in Porto, green tea."),
        ],
        "db-2": [("user", "For the new app we chose PostgreSQL because we need JSONB."), ("assistant", "Good.")],
    }.items():
        episode = episode_store(
            tenant=tenant,
            user_id=user_id,
            session_id=session,
            messages=[
                {"role": role, "content": text, "timestamp": (earlier + timedelta(minutes=n)).isoformat()}
                for n, (role, text) in enumerate(messages)
            ],
        ).episode
        episode_extract(episode_id=episode.pk)
    facts = {
        "database": database,
        "allergy": allergy,
        "superseded": lisbon,
        "superseding": porto,
        "pending": pending,
        "rejected": rejected,
        "archived": archived,
    }
    for fact in facts.values():
        fact.refresh_from_db()
    return Memories(user_id, facts, conflict)


def what_searches_answer(tenant, user_id: str, *, as_of) -> dict:
    """The user's memory as searches see it: hits of each query (text, status, scores), what was true at `as_of`,
    episodes found, and each fact's history length."""
    found = {}
    for query in QUERIES:
        hits = facts_search(tenant=tenant, user_id=user_id, query=query, include_pending=True)
        found[query] = [(hit.fact.content, hit.fact.status, hit.score, hit.vector, hit.keyword) for hit in hits]
        episodes = episodes_search(tenant=tenant, user_id=user_id, query=query)
        found[f"episodes: {query}"] = [(hit.episode.session_id, hit.score) for hit in episodes]
    found["as of"] = [
        hit.fact.content for hit in facts_search(tenant=tenant, user_id=user_id, query="lives in", as_of=as_of)
    ]
    facts = Fact.objects.filter(tenant=tenant, user_id=user_id).order_by("id")
    found["history"] = [
        (fact.content, fact.status, fact.valid_to is not None, FactEvent.objects.filter(fact_id=fact.pk).count())
        for fact in facts
    ]
    return found


def lines_of(response) -> list[dict]:
    """The records of an export response (streamed)."""
    body = b"".join(response.streaming_content).decode()
    assert body.endswith("\n")
    return [json.loads(line) for line in body.splitlines()]
