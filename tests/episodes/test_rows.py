"""Messages as rows: a post's cost follows what was posted, not how long the session is (appends are inserts, the
matching reads only the stored ends it needs), the matching rules hold on rows, and the data migration moves the
JSON arrays into rows and back."""

import json
import re

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test.utils import CaptureQueriesContext

from episodes.models import Episode, EpisodeMessage
from episodes.selectors import episodes_search
from episodes.services import episode_store
from tests.episodes.factories import stored
from tests.factories import make_tenant


def msg(role: str, content: str, timestamp: str | None = None) -> dict:
    return {"role": role, "content": content, "timestamp": timestamp}


def turns(start: int, count: int) -> list[dict]:
    """`count` messages from turn `start` on, user and assistant in turn, each saying something of its own."""
    roles = ("user", "assistant")
    return [
        msg(roles[n % 2], f"Message number {n} about topic{n}.", f"2024-01-01T10:{n // 60:02}:{n % 60:02}Z")
        for n in range(start, start + count)
    ]


def store(tenant, messages, session_id="s1"):
    return episode_store(tenant=tenant, user_id="u1", session_id=session_id, messages=messages)


def post_after(tenant, stored_count: int, *, snapshot: bool) -> list[str]:
    """The SQL of one post of the next turn after `stored_count` stored messages: the session so far (snapshot)
    or the latest turn alone."""
    session = f"s{stored_count}-{snapshot}"
    store(tenant, turns(0, stored_count), session_id=session)
    posted = turns(0, stored_count + 2) if snapshot else turns(stored_count, 2)
    with CaptureQueriesContext(connection) as queries:
        result = store(tenant, posted, session_id=session)
    assert (result.appended, result.episode.message_count) == (2, stored_count + 2)
    return [query["sql"] for query in queries.captured_queries]


@pytest.mark.django_db
@pytest.mark.parametrize("snapshot", [False, True], ids=["latest turn", "session so far"])
def test_a_post_runs_as_many_queries_after_300_messages_as_after_10(tenant, snapshot):
    short, long = post_after(tenant, 10, snapshot=snapshot), post_after(tenant, 300, snapshot=snapshot)

    assert len(long) == len(short) <= 8
    message_reads = [sql for sql in long if sql.startswith("SELECT") and '"episodes_episodemessage"' in sql]
    assert message_reads
    assert all(re.search(r"LIMIT \d+$", sql) for sql in message_reads)  # never the whole session
    episode_reads = [sql for sql in long if sql.startswith("SELECT") and 'FROM "episodes_episode"' in sql]
    assert not any("search_vector" in sql.split(" FROM ")[0] for sql in episode_reads)  # the old words are not read


@pytest.mark.django_db
def test_the_latest_turn_alone_reads_two_stored_messages_from_each_end(tenant):
    sql = post_after(tenant, 300, snapshot=False)

    limits = [re.search(r"LIMIT (\d+)$", query).group(1) for query in sql if '"episodes_episodemessage"' in query and
              query.startswith("SELECT")]  # fmt: skip
    assert limits == ["2", "2"]  # head and tail: as many as were posted
    assert sum(query.startswith("INSERT") and '"episodes_episodemessage"' in query for query in sql) == 1


@pytest.mark.django_db
def test_appended_rows_keep_the_order_the_counter_and_the_keyword_text(tenant):
    store(tenant, turns(0, 4))
    episode = store(tenant, [*turns(0, 4), msg("system", "Be brief."), *turns(4, 2)]).episode

    episode.refresh_from_db()
    assert [m["content"] for m in stored(episode)] == [
        *[m["content"] for m in turns(0, 4)], "Be brief.", *[m["content"] for m in turns(4, 2)],
    ]  # fmt: skip
    positions = EpisodeMessage.objects.filter(episode=episode).order_by("position").values_list("position", flat=True)
    assert list(positions) == [0, 1, 2, 3, 4, 5, 6]
    assert episode.content_chars == sum(len(m["content"]) for m in stored(episode))
    with connection.cursor() as cursor:
        cursor.execute("SELECT search_vector::text FROM episodes_episode WHERE id = %s", [episode.pk])
        words = dict(re.findall(r"'([^']+)':([\d,]+)", cursor.fetchone()[0]))
    assert {"topic0", "topic5", "brief"} <= set(words)  # every post's words, appended
    assert len(words["januari"].split(",")) == 1  # the day's date words once, not once per post


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("first", "second", "appended"),
    [
        pytest.param([msg("user", "a"), msg("assistant", "b")], [msg("user", "a"), msg("assistant", "b"),
                     msg("user", "c")], ["c"], id="snapshot"),
        pytest.param([msg("user", "a"), msg("assistant", "b"), msg("user", "c")], [msg("user", "c"),
                     msg("assistant", "d")], ["d"], id="tail overlapping"),
        pytest.param([msg("user", "a"), msg("assistant", "b")], [msg("user", "a"), msg("assistant", "b")], [],
                     id="retried post"),
        pytest.param([msg("system", "Today is Monday."), msg("user", "a")], [msg("system", "Today is Tuesday."),
                     msg("user", "a"), msg("assistant", "b")], ["b"], id="system prompt rewritten"),
        pytest.param([msg("system", "Today is Monday."), msg("user", "a")], [msg("system", "Today is Monday.")], [],
                     id="a stored system message alone"),
        pytest.param([msg("system", "Today is Monday."), msg("user", "a")], [msg("system", "Today is Tuesday.")],
                     ["Today is Tuesday."], id="a new system message alone"),
    ],
)  # fmt: skip
def test_the_matching_rules_hold_on_stored_rows(tenant, first, second, appended):
    store(tenant, first)

    result = store(tenant, second)

    assert [m["content"] for m in stored(result.episode)][len(first) :] == appended
    assert result.appended == len(appended)


@pytest.mark.django_db
def test_the_size_limit_counts_every_stored_character(tenant, settings):
    settings.EPISODES_MAX_EPISODE_CHARS = 50
    store(tenant, [msg("user", "x" * 30)])

    with pytest.raises(Exception, match="EPISODES_MAX_EPISODE_CHARS"):
        store(tenant, [msg("user", "y" * 21)])
    assert store(tenant, [msg("user", "y" * 20)]).appended == 1


@pytest.mark.django_db(transaction=True)
def test_the_data_migration_moves_the_json_arrays_into_rows_and_back():
    # Given episodes stored as JSON arrays (the schema before 0007)
    call_command("migrate", "episodes", "0006", verbosity=0)
    tenant, _ = make_tenant()
    old_apps = MigrationExecutor(connection).loader.project_state(("episodes", "0006_episodemessage")).apps
    OldEpisode = old_apps.get_model("episodes", "Episode")  # noqa: N806 - a model class
    said = [
        {"role": "user", "content": "I live in Berlin.", "timestamp": "2023-05-08T13:56:00Z"},
        {"role": "assistant", "content": "Noted.", "timestamp": None},
        {"role": "system", "content": "Be brief.", "timestamp": "2023-05-08T13:57:00.250000Z"},
    ]
    full = OldEpisode.objects.create(
        tenant_id=tenant.pk, user_id="u1", session_id="a", messages=said, message_count=3, search_text="Berlin"
    )
    empty = OldEpisode.objects.create(tenant_id=tenant.pk, user_id="u1", session_id="b", messages=[])

    # When it is migrated
    call_command("migrate", "episodes", verbosity=0)

    # Then each message is a row, in order, timestamps kept, and the characters are counted
    assert stored(Episode.objects.get(pk=full.pk)) == said
    assert Episode.objects.get(pk=full.pk).content_chars == len("I live in Berlin.Noted.Be brief.")
    assert not EpisodeMessage.objects.filter(episode_id=empty.pk).exists()
    assert [
        hit.episode.pk for hit in episodes_search(tenant=tenant, user_id="u1", query="Berlin", keyword_only=True)
    ] == [full.pk]  # the keyword tsvector kept its words

    # And the way back writes the same arrays
    call_command("migrate", "episodes", "0006", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, messages FROM episodes_episode ORDER BY id")
        arrays = {pk: json.loads(value) if isinstance(value, str) else value for pk, value in cursor.fetchall()}
        cursor.execute("SELECT count(*) FROM episodes_episodemessage")
        rows_left = cursor.fetchone()[0]
        cursor.execute("SELECT search_vector::text FROM episodes_episode WHERE id = %s", [full.pk])
        words = cursor.fetchone()[0]
    assert arrays == {full.pk: said, empty.pk: []}
    assert "'berlin'" in words
    assert "'brief'" in words  # the keyword text written again from the rows
    assert rows_left == 0
    call_command("migrate", verbosity=0)
