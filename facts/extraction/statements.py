"""Self-statements no pattern names: "I went to a support group yesterday", "我养了一只猫".

A clause the patterns did not take is kept when it says something lasting about the speaker: it has the speaker
as its subject ("I…", "my…", "我…"), is neither a reaction to the other person ("I'm so glad you…", "谢谢你") nor
vague ("I love it"), and carries content (an event, a state, a plan, a named thing, a number, a day). Each such
clause gets a score from those signals, calibrated into its confidence; a clause scoring under KEEP_SCORE is
left out. It is written in the third person without the subject and the speaker's filler: "Went to a support
group on 2023-05-07", "养了一只猫". Pure functions, like the rest of the offline extractor.
"""

import re
from dataclasses import dataclass

from .patterns import en
from .subject import subjectless

# bench/extraction.py: 0.35 keeps 15% more facts for 0.03 more recall, 0.5 loses 0.1 of recall.
KEEP_SCORE = 0.4
# LoCoMo is English: nothing measured the Chinese scores, so their facts stay under the auto-approval default.
ZH_CEILING = 0.7
MIN_CONTENT_WORDS = 2  # "I did it", "I'm tired": too little to be worth a memory

# What a speaker says before the statement: greetings, interjections, a name used as a vocative ("Hey Mel,").
_LEADING_FILLER = re.compile(
    r"^(?:(?:hey|hi|hello|wow|woah|whoa|oh|ooh|ah|aww|haha|hah|lol|omg|yeah|yep|yes|no|ok|okay|well|so|and|but"
    r"|also|actually|honestly|anyway|btw|guess what|you know what|oh man|oh my|gosh|yay|great|cool|awesome|thanks"
    r"|thank you|sure|totally|definitely|really|um|hmm|right|true|exactly|absolutely|nice|sweet|man|dude"
    r"|ha|yup|indeed|seriously|lately|recently)\b[\s,!.:;-]*"
    r"|[A-Z][a-z]+[,!]\s+)+"
)
# "Apart from meetings, I'm…", "Last weekend, I…", "Since we last spoke I…": a short lead before the subject.
_LEAD_THEN_SUBJECT = re.compile(
    r"^(?P<lead>(?:[\w'’-]+\s+){0,5}[\w'’-]+),?\s+(?P<rest>(?:i|i'm|i've|i'd|i'll|my)\b.*)", re.IGNORECASE
)
_SUBJECT = en(r"^(?:i|i'm|i've|i'd|i'll|my)\b")
_ZH_SUBJECT = re.compile("^我(?!们)")

# Spoken to or about the other person, or a reaction to what they said: not a fact of the speaker.
_ABOUT_THE_OTHER = en(r"\b(?:you|your|you're|you've|you'll|yours|yourself|u|ur)\b")
_REACTION = en(
    r"^i(?:'m|\s+am)\s+(?:so\s+|really\s+|very\s+|super\s+|just\s+)*(?:glad|happy|sorry|proud|sure|excited for|thrilled"
    r"|impressed|grateful|thankful)\b"
    r"|^i\s+(?:really\s+|totally\s+|just\s+|definitely\s+|also\s+)*(?:appreciate|agree|understand|hope|wish|bet|guess"
    r"|think|believe|know|admire|mean|feel you|can't wait|cannot wait|can't believe|see|totally get|get it)\b"
    r"|^i'll\s+(?:see|talk|let|keep|catch|definitely|try|check|think)\b|^i'd\s+(?:love|be happy|like)\b"
    r"|^(?:let me|count on me|take care|good luck|nice to|glad|thanks)\b"
)
_ZH_REACTION = re.compile(
    "^我(?:也|真|很|太|好|非常|特别)*(?:觉得|认为|希望|相信|同意|理解|明白|知道|高兴|开心|感谢|谢谢|佩服|羡慕)"
)
_VAGUE = en(r"^(?:i|i'm|i am|i've|i have|i'd|i'll)\s+(?:\w+\s+){0,2}(?:it|this|that|them|so|too|there|here|one)$")

# Signals of a lasting statement, each worth a part of the score.
_EVENT = en(
    r"\b(?:went|joined|started|began|got|bought|adopted|moved|visited|took|finished|made|created|signed up|attended"
    r"|participated|won|lost|met|painted|ran|decided|graduated|received|found|learned|learnt|tried|built|wrote"
    r"|published|launched|opened|quit|left|married|traveled|travelled|volunteered|organized|organised|hosted"
    r"|completed|passed|became|picked up|planted|baked|cooked|read|watched|saw|played|performed|recorded"
    r"|released|applied|accepted|enrolled|retired|switched|had)\b"
)
_STATE = en(
    r"\b(?:am|have|has|love|like|enjoy|prefer|hate|work|works|working|live|living|study|studying|own|keep|collect"
    r"|play|practice|practise|volunteer|teach|plan|planning|going to|want to|hope to|gonna|will|into|allergic"
    r"|married|single|divorced|pregnant|vegan|vegetarian|favorite|favourite|hobby|passion|dream|goal|career|job"
    r"|degree|kids|children|son|daughter|husband|wife|partner|dog|cat|pet|family|mom|dad|mother|father|brother"
    r"|sister|friend|friends|grandma|grandpa|team|company|school|college|university)\b"
)
_NAMED = re.compile(r"(?<!^)(?<![.!?]\s)\b[A-Z][a-zA-Z]+|\d")
_DAY = en(
    r"\b(?:yesterday|today|tomorrow|tonight|last|next|this)\s+(?:week|weekend|month|year|night|monday|tuesday"
    r"|wednesday|thursday|friday|saturday|sunday|summer|winter|spring|fall|autumn)\b|\b(?:yesterday|tomorrow"
    r"|recently|ago|since)\b"
)
_ZH_EVENT = re.compile(
    "了|过|正在|在学|开始|打算|计划|准备|决定|搬|养|买|参加|加入|去|学|换|辞|结婚|离婚|生了|怀孕|不再|再也"
)
_ZH_STATE = re.compile("是|有|喜欢|讨厌|爱|住|工作|上班|过敏|吃素|单身|孩子|儿子|女儿|老公|老婆|妻子|丈夫|猫|狗|宠物")
_STOPWORDS = frozenset(
    "i me my mine myself we our us a an the and or but so to of in on at for with it its it's is am are was were be"
    " been being this that these those there here just really very so too also then than as by from up out about"
    " i'm i've i'd i'll me not no do did does done have has had".split()
)

# Later in the clause the speaker is "they": "they" takes the verb forms "I" takes, except for am/was.
_LATER_FIRST_PERSON = (
    (en(r"\bi(?:'m|\s+am)\b"), "they're"),
    (en(r"\bi\s+was\b"), "they were"),
    (en(r"\bi(?='ve|'d|'ll)\b"), "they"),
    (re.compile(r"\bI\b"), "they"),
    (en(r"\bmyself\b"), "themselves"),
    (en(r"\bmy\b"), "their"),
    (en(r"\bme\b"), "them"),
    (en(r"\bmine\b"), "theirs"),
)
_MY = en(r"^my\s+")  # the user's own: "My kids are excited" is about the user
_TRAILING_VOCATIVE = re.compile(r",\s*[A-Z][a-z]+$")  # "I won't give up, Gina"
UNNAMED_REFERENCE = en(
    r"\b(?:it|this|that one|these|those|there|you|your)\b|\b(?:loves?|likes?|enjoys?) (?:how|that|when)\b"
)
_ZH_TRAILING = re.compile("[了啊呀呢吧啦哦嘛哈～~]+$")


@dataclass(frozen=True)
class Statement:
    content: str  # in the third person, without the subject
    category: str
    score: float  # how many signals of a lasting statement it carries
    ceiling: float = 0.85  # what a pattern's statement gets: a statement no pattern names is never surer

    @property
    def confidence(self) -> float:
        """The score calibrated on LoCoMo's development split (bench/extraction.py): about the share of such facts
        near an observation, 0.56 at KEEP_SCORE up to 0.85 from a score of 0.64."""
        return round(min(self.ceiling, 0.56 + 1.2 * (self.score - KEEP_SCORE)), 2)


def self_statement(clause: str) -> Statement | None:
    """The clause as a fact of the speaker, or None when it is not a lasting statement about them."""
    clause = _LEADING_FILLER.sub("", clause.strip()).strip(" ,.!;:-")
    if _ZH_SUBJECT.match(clause):
        return _chinese(clause)
    lead = ""
    if not _SUBJECT.match(clause):
        led = _LEAD_THEN_SUBJECT.match(clause)
        if led is None or _SUBJECT.match(led["lead"]):
            return None
        lead, clause = led["lead"], led["rest"]
    if _ABOUT_THE_OTHER.search(clause) or _REACTION.search(clause) or _VAGUE.match(clause.rstrip(" .!")):
        return None
    words = [word for word in re.findall(r"[\w']+", clause.lower()) if word not in _STOPWORDS]
    if len(words) < MIN_CONTENT_WORDS:
        return None
    score = 0.25 + min(len(words), 12) * 0.02
    score += 0.15 if _EVENT.search(clause) else 0.0
    score += 0.1 if _STATE.search(clause) else 0.0
    score += 0.1 if _NAMED.search(clause) else 0.0
    score += 0.1 if _DAY.search(f"{lead} {clause}") else 0.0
    score -= 0.05 if UNNAMED_REFERENCE.search(clause) else 0.0
    content = _third_person(clause)
    if lead and _DAY.search(lead):  # "Last weekend, I ran a race": the day stays; other leads are filler
        content = f"{content} {lead.lower()}"
    return Statement(content=content, category=_category(clause), score=round(score, 2))


def _chinese(clause: str) -> Statement | None:
    clause = _ZH_TRAILING.sub("", clause.rstrip("。！!，,；;～~ "))
    if "你" in clause or _ZH_REACTION.match(clause) or len(clause) < 4:
        return None
    score = 0.3 + min(len(clause), 20) * 0.01
    score += 0.15 if _ZH_EVENT.search(clause) else 0.0
    score += 0.1 if _ZH_STATE.search(clause) else 0.0
    score += 0.1 if re.search(r"\d|[A-Za-z]{2,}", clause) else 0.0
    content = _ZH_TRAILING.sub("", _ZH_SUBJECT.sub("", clause, count=1))
    category = "preference" if re.search("喜欢|讨厌|爱|偏好", content) else "profile"
    return Statement(content=content, category=category, score=round(score, 2), ceiling=ZH_CEILING)


def _third_person(clause: str) -> str:
    """ "I just finished my first marathon" -> "Just finished their first marathon"; "My kids are…" -> "Kids are…"."""
    clause = _MY.sub("", _TRAILING_VOCATIVE.sub("", clause.rstrip(" .!;:,")), count=1)
    clause = later_first_person(subjectless(clause))
    return clause[:1].upper() + clause[1:]


def later_first_person(text: str) -> str:
    """ "Always uses dark mode in my editor" -> "… in their editor": the speaker is "they" after the subject."""
    for pattern, replacement in _LATER_FIRST_PERSON:
        text = pattern.sub(replacement, text)
    return text


def _category(clause: str) -> str:
    lowered = clause.lower()
    if re.search(r"\b(?:love|like|enjoy|prefer|hate|favou?rite|into)\b", lowered):
        return "preference"
    if re.search(r"\b(?:decided|plan|planning|going to|gonna|will)\b", lowered):
        return "decision"
    if re.search(r"\b(?:project|working on|building|writing)\b", lowered):
        return "project"
    return "profile"
