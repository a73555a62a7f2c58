"""What the chat model is asked to judge a new fact against the user's nearest facts, and how its answer becomes
judgements."""

from typing import ClassVar

from pydantic import BaseModel, Field

from ai.chat import ChatAnswer, OpenAIChat

from .judgement import Judgement, Relation


class PairJudgement(BaseModel):
    index: int = Field(strict=True)  # of the existing fact; strict: "0" or true is not an index
    relation: Relation
    certainty: float = Field(strict=True, ge=0, le=1)  # strict: no "0.9", no true
    reason: str


class FactJudgements(ChatAnswer):
    schema_name: ClassVar[str] = "fact_judgements"

    judgements: list[PairJudgement]


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
        answer=FactJudgements,
    )
    judgements = [Judgement(Relation.UNRELATED, 1.0, "not labelled by the model")] * len(existing)
    for item in answer.judgements:
        if 0 <= item.index < len(existing):
            judgements[item.index] = Judgement(item.relation, item.certainty, item.reason)
    return judgements
