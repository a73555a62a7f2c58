"""Episode services: message identity, the background run's guarantees (idempotent, all or nothing per range,
failures recorded), retry rules and the extractive summary."""

import pytest

import facts.services.extraction
from core.errors import ApplicationError
from core.locks import LockNamespace, session_lock
from episodes import extraction
from episodes.extraction import episode_extract
from episodes.matching import new_messages
from episodes.models import Episode
from episodes.services import episode_retry, episode_store
from episodes.summaries import summary_extractive
from facts.models import Fact
from tests.episodes.factories import TURN_1, TURN_2
from tests.threads import held_elsewhere

pytestmark = pytest.mark.django_db


def msg(role: str, content: str, timestamp: str | None = None) -> dict:
    return {"role": role, "content": content, "timestamp": timestamp}


A, B, C, D = msg("user", "a"), msg("assistant", "b"), msg("user", "c"), msg("assistant", "d")
S1, S2 = msg("system", "You are helpful. Today is Monday."), msg("system", "You are helpful. Today is Tuesday.")


class TestNewMessages:
    @pytest.mark.parametrize(
        ("stored", "posted", "new"),
        [
            pytest.param([], [A, B], [A, B], id="a new session"),
            pytest.param([A, B], [A, B, C, D], [C, D], id="the session so far"),
            pytest.param([A, B], [C, D], [C, D], id="only the new turns"),
            pytest.param([A, B, C], [C, D], [D], id="new turns overlapping the stored end"),
            pytest.param([A, B, C, D], [A, B], [], id="an earlier snapshot"),
            pytest.param([A, B, C, D], [C, D], [], id="a retried last post"),
            pytest.param([A, B], [A, B], [], id="the same again"),
            pytest.param([A, B], [B, A], [A], id="the stored end, then a repeat"),
        ],
    )
    def test_identity_rule(self, stored, posted, new):
        assert new_messages(stored, posted) == new

    @pytest.mark.parametrize(
        ("stored", "posted", "new"),
        [
            pytest.param([S1, A, B], [S2, A, B, C, D], [C, D], id="a rewritten system prompt"),
            pytest.param([S1, A, B], [S2, A, B], [], id="the same session with a rewritten system prompt"),
            pytest.param([A, B], [A, B, S2, C], [S2, C], id="a system message among the new turns"),
            pytest.param([S1, A, B], [S1], [], id="a stored system message alone"),
            pytest.param([S1, A, B], [S2], [S2], id="a new system message alone"),
        ],
    )
    def test_system_messages_take_no_part_in_matching(self, stored, posted, new):
        assert new_messages(stored, posted) == new

    def test_timestamps_tell_repeated_words_apart_only_when_both_messages_carry_one(self):
        ok_1, ok_2 = msg("user", "ok", "2024-01-01T10:00:00Z"), msg("user", "ok", "2024-01-01T10:05:00Z")

        assert new_messages([A, ok_1], [ok_2]) == [ok_2]
        assert new_messages([A, ok_1], [msg("user", "ok")]) == []
        assert new_messages([A, msg("user", "ok")], [ok_2]) == []


def store(tenant, messages, **fields):
    return episode_store(tenant=tenant, user_id="u1", session_id="s1", messages=messages, **fields)


def test_storing_validates_like_the_api_for_other_callers(tenant):
    with pytest.raises(Exception, match=r"messages\[1\]\.role"):
        store(tenant, [TURN_1[0], {"role": "robot", "content": "beep"}])
    assert not Episode.objects.exists()


def test_the_status_moves_from_pending_to_running_to_done(tenant, monkeypatch):
    episode = store(tenant, TURN_1).episode
    real_extract = extraction.facts_extract
    seen = []

    def spy(**kwargs):
        seen.append(Episode.objects.get(pk=episode.pk).extraction_status)
        return real_extract(**kwargs)

    monkeypatch.setattr(extraction, "facts_extract", spy)

    assert episode.extraction_status == "pending"
    assert episode_extract(episode_id=episode.pk) == "done"
    assert seen == ["running"]
    assert Episode.objects.get(pk=episode.pk).extraction_status == "done"


def test_a_run_that_dies_mid_way_writes_no_fact_and_the_rerun_extracts_each_fact_once(tenant, monkeypatch):
    episode = store(tenant, TURN_1).episode  # tasks queued after commit never run here: the test calls them
    real_written = facts.services.extraction.fact_written
    calls = []

    def dies_on_the_second_fact(judged, **kwargs):
        calls.append(judged.fact.content)
        if len(calls) == 2:
            raise MemoryError("worker killed")  # the first fact is already written in this transaction
        return real_written(judged, **kwargs)

    monkeypatch.setattr(facts.services.extraction, "fact_written", dies_on_the_second_fact)
    assert episode_extract(episode_id=episode.pk) == "failed"  # recorded, not raised: the schedule retries it

    assert not Fact.objects.exists()
    episode.refresh_from_db()
    assert (episode.extraction_status, episode.extracted_message_count) == ("failed", 0)
    assert "worker killed" in episode.extraction_error

    monkeypatch.setattr(facts.services.extraction, "fact_written", real_written)
    assert episode_extract(episode_id=episode.pk) == "done"
    assert episode_extract(episode_id=episode.pk) == "up to date"  # a duplicate delivery does nothing
    assert sorted(Fact.objects.values_list("content", flat=True)) == [
        "Lives in Berlin",
        "Prefers PostgreSQL for new projects",
    ]


def test_a_run_that_dies_right_after_a_range_committed_keeps_it_and_the_rerun_repeats_nothing(tenant, monkeypatch):
    episode = store(tenant, TURN_1).episode
    real_extract = extraction.facts_extract

    def dies_right_after(**kwargs):
        real_extract(**kwargs)  # the range's facts and the watermark past it are committed together
        raise MemoryError("worker killed")

    monkeypatch.setattr(extraction, "facts_extract", dies_right_after)
    assert episode_extract(episode_id=episode.pk) == "failed"

    episode.refresh_from_db()
    assert (episode.extracted_message_count, Fact.objects.count()) == (2, 2)
    monkeypatch.setattr(extraction, "facts_extract", real_extract)
    assert episode_extract(episode_id=episode.pk) == "done"
    assert Fact.objects.count() == 2


def test_messages_arriving_during_a_run_wait_for_their_own_run(tenant, monkeypatch):
    episode = store(tenant, TURN_1).episode
    real_extract = extraction.facts_extract

    def a_post_arrives_meanwhile(**kwargs):
        store(tenant, TURN_2)
        return real_extract(**kwargs)

    monkeypatch.setattr(extraction, "facts_extract", a_post_arrives_meanwhile)
    assert episode_extract(episode_id=episode.pk) == "pending"

    episode.refresh_from_db()
    assert (episode.message_count, episode.extracted_message_count, episode.summarized_message_count) == (4, 2, 2)
    monkeypatch.setattr(extraction, "facts_extract", real_extract)
    assert episode_extract(episode_id=episode.pk) == "done"
    episode.refresh_from_db()
    assert (episode.extracted_message_count, episode.summarized_message_count) == (4, 4)
    assert Fact.objects.filter(source_episode=episode).count() == 3


def test_retry_is_refused_while_a_run_is_alive_and_allowed_once_it_died(tenant, other_tenant_and_key):
    episode = store(tenant, TURN_1).episode
    Episode.objects.filter(pk=episode.pk).update(extraction_status="running")

    with run_held_elsewhere(episode.pk), pytest.raises(ApplicationError) as refused:
        episode_retry(tenant=tenant, episode_id=episode.pk)
    assert refused.value.status_code == 409

    # The run's process died, and its lock went with its connection: the episode can be queued again.
    assert episode_retry(tenant=tenant, episode_id=episode.pk).extraction_status == "pending"
    with pytest.raises(ApplicationError) as missing:
        episode_retry(tenant=other_tenant_and_key[0], episode_id=episode.pk)
    assert missing.value.status_code == 404


def run_held_elsewhere(episode_id: int):
    """A worker running this episode: its run lock held by another database session until the block ends."""
    return held_elsewhere(lambda: session_lock(LockNamespace.EPISODE_EXTRACTION, episode_id))


def test_the_extractive_summary_opens_with_the_user_and_stays_within_bounds():
    messages = [
        msg("user", "Hey! How are you?"),
        msg("assistant", "Great, thanks."),
        msg("user", "I am planning a trip to Lisbon in October with my sister Ana. We want to see Sintra too."),
        msg("assistant", "Lisbon in October is lovely; Sintra is an easy day trip from Lisbon by train."),
        msg("user", "Cool."),
    ]

    text = summary_extractive(messages, max_chars=120)

    assert text.startswith("I am planning a trip to Lisbon in October")
    assert len(text) <= 120
    assert "Hey" not in text
    assert "Cool" not in text
    assert summary_extractive([msg("system", "You are helpful.")]) == ""


def test_extracted_facts_remember_the_messages_of_the_episode_they_come_from(tenant):
    # Given a session stored in two posts (the second extraction run starts at message 2), with a system message
    episode = episode_store(tenant=tenant, user_id="u1", session_id="s1", messages=TURN_1).episode
    episode_extract(episode_id=episode.pk)
    later = [msg("system", "Be brief."), *TURN_2, msg("user", "I prefer green tea in the morning.")]
    episode_store(tenant=tenant, user_id="u1", session_id="s1", messages=[*TURN_1, *later])

    episode_extract(episode_id=episode.pk)

    provenance = dict(Fact.objects.filter(source_episode=episode).values_list("content", "source_messages"))
    assert provenance["Lives in Berlin"] == [0]
    assert provenance["Prefers PostgreSQL for new projects"] == [0]
    assert provenance["Prefers green tea in the morning"] == [3, 5]  # said twice; indexes in the whole episode


def test_facts_extracted_from_an_agents_episode_belong_to_that_agent(tenant):
    # Given a session an agent stored
    episode = episode_store(tenant=tenant, user_id="u1", session_id="s1", messages=TURN_1, agent_id="planner").episode

    # When it is extracted
    episode_extract(episode_id=episode.pk)

    # Then its facts are that agent's, as if the agent had saved them itself
    agents = set(Fact.objects.filter(source_episode=episode).values_list("agent_id", flat=True))
    assert agents == {"planner"}
