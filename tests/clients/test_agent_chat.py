"""examples/agent_chat.py end to end: the script run as a user runs it, against a live server and the local fake
OpenAI server (tests/fake_openai.py) playing a model that calls memory_add, then answers."""

import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from episodes.models import Episode
from facts.models import Fact
from tests.fake_openai import API_KEY as FAKE_OPENAI_KEY
from tests.fake_openai import tool_calls_reply

SCRIPT = Path(settings.BASE_DIR) / "examples" / "agent_chat.py"
FACT = "Prefers PostgreSQL for new projects"


def run_chat(live_server, key, fake_openai, *args: str) -> subprocess.CompletedProcess:
    environment = {
        **os.environ,
        "MEMORYPROJECT_URL": live_server.url,
        "MEMORYPROJECT_API_KEY": key,
        "OPENAI_BASE_URL": fake_openai.base_url,
        "OPENAI_API_KEY": FAKE_OPENAI_KEY,
    }
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--model", "fake-chat", *args],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def chat_requests(fake_openai) -> list[dict]:
    return [request["body"] for request in fake_openai.requests_to("/v1/chat/completions")]


def test_the_model_saves_a_fact_that_the_next_turn_is_given(live_server, tenant_and_key, fake_openai):
    tenant, key = tenant_and_key
    fake_openai.reply_next(
        tool_calls_reply(("memory_add", {"content": FACT, "category": "preference"})),
        "Noted: PostgreSQL for new projects.",
        "You prefer PostgreSQL.",
    )

    run = run_chat(
        live_server,
        key,
        fake_openai,
        *("--user", "alice", "--session", "chat-1"),
        *("--say", "For new projects I always pick PostgreSQL."),
        *("--say", "Which database should my next project use?"),
    )

    assert run.returncode == 0, run.stderr
    assert "assistant> Noted: PostgreSQL for new projects." in run.stdout
    assert "assistant> You prefer PostgreSQL." in run.stdout
    # The model called memory_add: the fact is stored for the user, from the agent.
    fact = Fact.objects.get(tenant=tenant, user_id="alice", source="agent")  # the episode's extraction adds its own
    assert (fact.content, fact.category, fact.source) == (FACT, "preference", "agent")
    first, after_tool, second = chat_requests(fake_openai)
    # The tools were offered, and the tool's result went back to the model with the call's id.
    assert {tool["function"]["name"] for tool in first["tools"]} >= {"memory_add", "memory_search", "kb_search"}
    assert FACT not in first["messages"][0]["content"]  # nothing was known before the first turn
    assert after_tool["messages"][-2]["tool_calls"][0]["function"]["name"] == "memory_add"
    assert after_tool["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": f"Saved as fact {fact.pk}.",
    }
    # The next turn's system prompt holds what the first one saved.
    assert second["messages"][0]["role"] == "system"
    assert FACT in second["messages"][0]["content"]
    assert [message["role"] for message in second["messages"][1:]] == ["user", "assistant", "user"]
    # One episode for the session, holding both turns once each.
    episode = Episode.objects.get(tenant=tenant, user_id="alice")
    assert (episode.session_id, episode.message_count) == ("chat-1", 4)
    stored = [(row.role, row.content) for row in episode.message_rows.order_by("position")]
    assert stored == [
        ("user", "For new projects I always pick PostgreSQL."),
        ("assistant", "Noted: PostgreSQL for new projects."),
        ("user", "Which database should my next project use?"),
        ("assistant", "You prefer PostgreSQL."),
    ]


def test_a_wrong_tool_call_is_shown_to_the_model_which_goes_on(live_server, tenant_and_key, fake_openai):
    _, key = tenant_and_key
    fake_openai.reply_next(tool_calls_reply(("memory_teleport", {})), "Sorry, I cannot do that.")

    run = run_chat(live_server, key, fake_openai, "--user", "bob", "--say", "Teleport my memories.")

    assert run.returncode == 0, run.stderr
    assert "assistant> Sorry, I cannot do that." in run.stdout
    tool_message = chat_requests(fake_openai)[1]["messages"][-1]
    assert tool_message["role"] == "tool"
    assert "memory_teleport" in tool_message["content"]


def test_turns_are_read_from_stdin_without_say(live_server, tenant_and_key, fake_openai):
    tenant, key = tenant_and_key
    fake_openai.reply_next("Hello!", "Bye!")
    environment = {
        **os.environ,
        "MEMORYPROJECT_URL": live_server.url,
        "MEMORYPROJECT_API_KEY": key,
        "OPENAI_BASE_URL": fake_openai.base_url,
        "OPENAI_API_KEY": FAKE_OPENAI_KEY,
    }

    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--user", "carol", "--session", "s-stdin"],
        input="Hi there\nGoodbye\n",
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert run.returncode == 0, run.stderr
    assert "assistant> Hello!" in run.stdout
    assert "assistant> Bye!" in run.stdout
    assert Episode.objects.get(tenant=tenant, user_id="carol", session_id="s-stdin").message_count == 4
