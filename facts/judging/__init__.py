"""The offline judge: how a new fact relates to an existing fact of the same user, by rules alone.

Pure functions: no database, no model, no network. Facts are short statements in English or Chinese, written in
any person ("I prefer X", "User prefers X", "Prefers X", "我喜欢X"). Both are reduced to tokens (subjects, fillers
and negation words dropped, English stemmed (Snowball), synonyms merged, Chinese split into characters except for a
small lexicon of words) and compared by the rules in `_RULES`, the first that decides wins:

1. nothing to compare                                   -> unrelated
2. the same text after normalisation                    -> duplicate (1.0)
3. an explicit change in either fact: "switched from X to Y", "Y instead of X", "从X换成Y", "不再用X，改用Y"
   (the other states X: contradicts 0.9-0.95; states Y: refines/duplicate), or "moved to Y", "now uses Y", "改用Y"
   without X (the other sets the attribute the marker names to another value: contradicts 0.65-0.85)
4. one fact negated, the other not, the rest the same    -> contradicts (0.9-0.95; 0.6 when the scopes differ)
5. the same words, word forms and synonyms unified      -> duplicate (0.9-0.95)
6. the same comparison turned round ("tea over coffee") -> contradicts (0.8)
7. one fact's words contain the other's                 -> refines (new says more) / duplicate (new says less)
8. another value of one attribute, found by aligning the two facts on their common start and end:
   exclusive ("lives in", "name is", age, "住在", "叫")   -> contradicts (0.8-0.9)
   weak ("prefers", "uses X for", "偏好", "用X做")        -> contradicts (0.6) if the facts read alike, else unrelated
   non-exclusive ("likes", "uses", "喜欢")                -> unrelated
9. nearly the same words, and similar embeddings        -> duplicate (0.7)
10. anything else                                       -> unrelated

`similarity`, the cosine of the two facts' embeddings, only gates the weak rules: it is never the evidence of a
contradiction, because the hashing embedder scores paraphrases low and a sentence model scores opposites high.
"""

from .chat import llm_judge
from .judgement import Judgement, Relation
from .rules import judge_by_rules

__all__ = ["Judgement", "Relation", "judge_by_rules", "llm_judge"]
