"""What the chat model is asked to judge a new fact against the user's nearest facts, and how its answer becomes
judgements."""

from ai.chat import OpenAIChat

from .judgement import Judgement, Relation

JUDGE_SCHEMA = {
    "type": "object",
    "properties": {
        "judgements": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "index": {"type": "integer"},
                    "relation": {"type": "string", "enum": [relation.value for relation in Relation]},
                    "certainty": {"type": "number", "minimum": 0, "maximum": 1},
                    "reason": {"type": "string"},
                },
                "required": ["index", "relation", "certainty", "reason"],
            },
        }
    },
    "required": ["judgements"],
}

JUDGE_SYSTEM = """You keep a memory of facts about one user clean. Compare a NEW fact with each EXISTING fact and
label the pair:
- duplicate: the same information (reworded, or the new one says less);
- refines: the new one says the same as the existing one plus more detail;
- contradicts: both cannot be true now (a changed value, a negation, a replacement such as "switched to");
- unrelated: anything else, including compatible facts on the same topic.
certainty is how sure you are (0..1). Be conservative with "contradicts": it retires the existing fact."""


def llm_judge(chat: OpenAIChat, *, new: str, existing: list[str]) -> list[Judgement]:
    """One call labels every (new, existing[i]) pair; a pair the model skipped counts as unrelated."""
    listing = "\n".join(f"{index}. {content}" for index, content in enumerate(existing))
    answer = chat.complete_json(
        system=JUDGE_SYSTEM,
        user=f"NEW fact: {new}\n\nEXISTING facts:\n{listing}",
        schema=JUDGE_SCHEMA,
        schema_name="fact_judgements",
    )
    judgements = [Judgement(Relation.UNRELATED, 1.0, "not labelled by the model")] * len(existing)
    for item in answer["judgements"]:
        if 0 <= item["index"] < len(existing):
            judgements[item["index"]] = Judgement(Relation(item["relation"]), item["certainty"], item["reason"])
    return judgements
