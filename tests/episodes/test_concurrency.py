"""Concurrent posts on separate database connections (threads), committed for real; tasks run inline after each
commit (test settings), so background runs of one episode race too."""

import pytest

from episodes.models import Episode
from episodes.services import episode_store
from facts.models import Fact
from tests.episodes.factories import TURN_1, TURN_2, stored
from tests.factories import make_tenant
from tests.threads import run_together

pytestmark = pytest.mark.django_db(transaction=True)


def test_concurrent_first_posts_of_one_session_make_one_episode_without_duplicates():
    tenant, _ = make_tenant()

    results = run_together(
        3, lambda _: episode_store(tenant=tenant, user_id="u1", session_id="s1", messages=TURN_1).created
    )

    assert sorted(results) == [False, False, True]
    episode = Episode.objects.get(tenant=tenant)
    assert [m["content"] for m in stored(episode)] == [m["content"] for m in TURN_1]
    assert episode.extraction_status == "done"
    assert Fact.objects.filter(tenant=tenant).count() == 2


def test_concurrent_posts_of_different_turns_both_land_and_each_is_extracted_once():
    tenant, _ = make_tenant()
    turns = [TURN_1, TURN_2]

    run_together(2, lambda index: episode_store(tenant=tenant, user_id="u1", session_id="s1", messages=turns[index]))

    episode = Episode.objects.get(tenant=tenant)
    assert episode.message_count == 4
    assert sorted(m["content"] for m in stored(episode)) == sorted(m["content"] for m in TURN_1 + TURN_2)
    assert (episode.extraction_status, episode.extracted_message_count, episode.summarized_message_count) == (
        "done",
        4,
        4,
    )
    assert sorted(Fact.objects.filter(tenant=tenant).values_list("content", flat=True)) == [
        "Lives in Berlin", "Prefers PostgreSQL for new projects", "Prefers green tea in the morning",
    ]  # fmt: skip
