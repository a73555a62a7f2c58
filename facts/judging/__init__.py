"""The offline judge: how a new fact relates to an existing fact of the same user, by rules alone.

Pure functions: no database, no model, no network. Facts are short statements in English or Chinese, written in
any person ("I prefer X", "User prefers X", "Prefers X", "我喜欢X"). Both are reduced to tokens (subjects, fillers
and negation words dropped, English stemmed (Snowball), synonyms merged, numbers as digits ("three", "三个" -> 3),
Chinese split into characters except for a small lexicon of words) and compared by the rules in `_RULES`, the first
that decides wins:

1. nothing to compare                                   -> unrelated
2. the same text after normalisation                    -> duplicate (1.0)
3. an explicit change in either fact: "switched from X to Y", "Y instead of X", "从X换成Y", "不再用X，改用Y"
   (the other states X: contradicts 0.9-0.95; states Y: refines/duplicate), or "moved to Y", "now uses Y", "改用Y"
   without X (the other sets the attribute the marker names to another value: contradicts 0.65-0.85), or an hour
   or number moved ("changed the standup to 10am" / "the standup is at 9am": contradicts 0.7); not for a plan
   ("wants to move to Lisbon")
4. one fact negated near its start, the other not, the rest the same (time and reason clauses left out, a kind
   standing for its members: "has no pets" / "has a cat")  -> contradicts (0.85-0.95; 0.6 when the scopes differ)
5. two members of one exclusive state: diet, relationship status, employment ("is vegan" / "is vegetarian",
   "已婚" / "离婚了", "is retired" / "works as X"): contradicts (0.8); two occupations ("is a nurse" / "is a
   teacher", "是大学老师" / "是中学老师"): contradicts (0.7, people hold two jobs: a human decides)
6. the same words, word forms and synonyms unified      -> duplicate (0.9-0.95)
7. the same comparison turned round ("tea over coffee") -> contradicts (0.8)
8. one fact's words contain the other's                 -> refines (new says more) / duplicate (new says less)
9. another value of one attribute, found by aligning the two facts on their common start and end:
   exclusive ("lives in", "name is", age, counts, hours, "studies at", "commutes by", "住在", "叫")
                                                        -> contradicts (0.7-0.9)
   weak ("prefers", "uses X for", "偏好", "用X做")        -> contradicts (0.6) if the facts read alike, else unrelated
   any other verb when one fact says "now" ("drives a Toyota now") -> contradicts (0.65)
   non-exclusive ("likes", "uses", "喜欢")                -> unrelated
10. nearly the same words, and similar embeddings       -> duplicate (0.7)
11. anything else                                       -> unrelated

Reasons quote whole words as the facts wrote them ("'成都' -> '重庆'"), digits for numbers.

`similarity`, the cosine of the two facts' embeddings, only gates the weak rules: it is never the evidence of a
contradiction, because the hashing embedder scores paraphrases low and a sentence model scores opposites high.
"""

from .chat import llm_judge
from .judgement import Judgement, Relation
from .rules import judge_by_rules

__all__ = ["Judgement", "Relation", "judge_by_rules", "llm_judge"]
