"""A complete agent loop with long-term memory: memoryproject for the memory, any OpenAI-compatible chat model.

For every user turn:
  1. fetch what is known about the user for this turn (POST /api/v1/context) into the system prompt;
  2. ask the model, offering it the memory tools (GET /api/v1/tools);
  3. run each tool call it makes through POST /api/v1/tools/call and hand the results back, until it answers;
  4. post the session so far to /api/v1/episodes (the server skips the messages it already has, and extracts
     facts from the new ones in the background).

    pip install ./clients/python openai
    export MEMORYPROJECT_URL=http://127.0.0.1:8000 MEMORYPROJECT_API_KEY=mp_...
    export OPENAI_API_KEY=sk-...            # and OPENAI_BASE_URL for another OpenAI-compatible endpoint
    python examples/agent_chat.py --user alice                      # interactive: one turn per line
    python examples/agent_chat.py --user alice --say "I prefer PostgreSQL" --say "Which database do I like?"
"""

import argparse
import sys
import uuid
from datetime import UTC, datetime

from openai import OpenAI

from memoryproject_client import MemoryClient, MemoryProjectError

SYSTEM_PROMPT = """You are a helpful assistant with a long-term memory of the user.
Use the memory tools: save durable facts the user tells you (preferences, decisions, personal details, projects)
with memory_add, search before answering about their past, correct outdated facts with memory_update.
What you already know about the user and the relevant documents for this turn follow."""


class Agent:
    """One user's chat session: the transcript so far, and the clients it talks through."""

    def __init__(
        self, memory: MemoryClient, llm: OpenAI, *, model: str, user_id: str, session_id: str, max_tool_rounds: int = 5
    ) -> None:
        self.memory, self.llm, self.model = memory, llm, model
        self.user_id, self.session_id, self.max_tool_rounds = user_id, session_id, max_tool_rounds
        self.tools = memory.tools.list(format="openai")  # OpenAI function-calling definitions, passed as they are
        self.transcript: list[dict] = []  # what was said: user and assistant messages, with their times

    def turn(self, text: str) -> str:
        """Answer one user message; returns the assistant's reply."""
        self.transcript.append(_said("user", text))
        context = self.memory.context(self.user_id, query=text)
        messages = [
            {"role": "system", "content": f"{SYSTEM_PROMPT}\n\n{context.text}"},
            *({"role": m["role"], "content": m["content"]} for m in self.transcript),
        ]
        reply = self._answer(messages)
        if reply.strip():  # the server stores only messages with something to read
            self.transcript.append(_said("assistant", reply))
        # The whole session every time: stored messages are skipped, so nothing is duplicated, and a turn whose post
        # failed goes again with the next one. The system prompt is left out: it is rebuilt every turn.
        try:
            self.memory.episodes.store(self.user_id, self.session_id, self.transcript)
        except MemoryProjectError as error:
            print(f"  (the session was not stored this turn: {error})", file=sys.stderr)
        return reply

    def _answer(self, messages: list[dict]) -> str:
        """Ask the model until it answers in words, running the tool calls it makes on the way."""
        for _ in range(self.max_tool_rounds):
            completion = self.llm.chat.completions.create(model=self.model, messages=messages, tools=self.tools)
            message = completion.choices[0].message
            if not message.tool_calls:
                return message.content or ""
            messages.append(message.model_dump(exclude_none=True))  # the assistant's tool calls, as it made them
            for call in message.tool_calls:
                # The model's JSON arguments go as they are: a bad call comes back as is_error with a content that
                # says what was wrong, which the model reads and can fix.
                result = self.memory.tools.call(self.user_id, call.function.name, call.function.arguments)
                print(f"  [{call.function.name}] {result.content}", file=sys.stderr)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result.content})
        return "(I could not finish: too many tool calls in a row.)"


def _said(role: str, content: str) -> dict:
    # A timestamp keeps two identical messages ("ok", "ok") apart when the server skips what it already stored.
    return {"role": role, "content": content, "timestamp": datetime.now(UTC).isoformat()}


def _turns(said: list[str] | None):
    """The scripted turns, or the lines typed on stdin until EOF or "exit"."""
    if said:
        yield from said
        return
    if sys.stdin.isatty():
        print("Chat with the agent; an empty line or Ctrl-D ends it.", file=sys.stderr)
    while True:
        if sys.stdin.isatty():
            print("you> ", end="", flush=True, file=sys.stderr)
        line = sys.stdin.readline()
        if not line or line.strip() in ("", "exit", "quit"):
            return
        yield line.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--user", default="demo-user", help="the end user's id in memoryproject")
    parser.add_argument("--session", help="the session id (default: a new one)")
    parser.add_argument("--model", default="gpt-4o-mini", help="the chat model (default gpt-4o-mini)")
    parser.add_argument("--say", action="append", help="a user turn (repeatable); without it, read turns from stdin")
    parser.add_argument("--max-tool-rounds", type=int, default=5, help="tool-call rounds allowed per turn")
    args = parser.parse_args(argv)

    session_id = args.session or f"chat-{uuid.uuid4().hex[:12]}"
    # MemoryClient reads MEMORYPROJECT_URL / MEMORYPROJECT_API_KEY, OpenAI reads OPENAI_BASE_URL / OPENAI_API_KEY.
    with MemoryClient() as memory, OpenAI() as llm:
        agent = Agent(
            memory,
            llm,
            model=args.model,
            user_id=args.user,
            session_id=session_id,
            max_tool_rounds=args.max_tool_rounds,
        )
        for text in _turns(args.say):
            if args.say:
                print(f"you> {text}")
            print(f"assistant> {agent.turn(text)}", flush=True)
    print(f"(session {session_id} stored for user {args.user})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
