"""The words and patterns the offline judge knows, in English and Chinese: subjects, negations, fillers,
synonyms, attribute and frame words, and the patterns of an explicit change ("switched from X to Y", "从X换成Y")."""

import re

from core.text import CJK

PUNCTUATION = str.maketrans(
    {"‘": "'", "’": "'", "`": "'", "´": "'", "“": '"', "”": '"', "„": '"', "«": '"', "»": '"', "。": ".", "、": ","}
)


CONTRACTIONS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bwon't\b"), "will not"),
    (re.compile(r"\bcan't\b|\bcannot\b"), "can not"),
    (re.compile(r"\bshan't\b"), "shall not"),
    (re.compile(r"n't\b"), " not"),
    (re.compile(r"\bi'm\b"), "i am"),
    (re.compile(r"\b(he|she|it|that|there|what|who)'s\b"), r"\1 is"),
    (re.compile(r"'re\b"), " are"),
    (re.compile(r"'ve\b"), " have"),
    (re.compile(r"'ll\b"), " will"),
    (re.compile(r"'d\b"), " would"),
    (re.compile(r"'s\b|(?<=s)'(?=\s|$)"), ""),  # possessive: "the user's name" -> "the user name"
)


# "dark-mode" and "dark mode" are one phrase; a date "2023-05-12" stays one word.
WORD_JOINER = re.compile(r"(?<=[^\W\d])[-/](?=\w)|(?<=\w)[-/](?=[^\W\d])")
SPACE_BESIDE_CJK = re.compile(f"(?<=[{CJK}])\\s+|\\s+(?=[{CJK}])")


EDGE_PUNCTUATION = re.compile(r"^[\s.,;:!?\"'()\[\]~*-]+|[\s.,;:!?\"'()\[\]~*-]+$")
SUBJECT_EN = re.compile(
    r"^(?:(?:the|this|our|my|a)\s+)?(?:users?|customers?|clients?|team|person)\b\s*"
    r"|^(?:i|we|he|she|they|my|our|his|her|their|me)\b\s*"
)


SUBJECT_ZH = re.compile("^(?:我们的|我们|咱们的|咱们|我的|我|用户的|用户|他们的|他们|她们的|她们|他的|她的|他|她)")


# Multi-word phrases that act as one word; the rest of the pipeline works word by word.
PHRASES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bnot only\b"), " "),  # "not only X but also Y" denies nothing
    (re.compile(r"\bno longer\b"), " no_longer "),
    (re.compile(r"\bnot any ?more\b"), " not "),
    (re.compile(r"(?<!\bis )(?<!\bam )(?<!\bare )(?<!\bget )(?<!\bgot )\bused to\b"), " used_to "),
    (re.compile(r"\b(?:gave|given|give|gives|giving) up\b"), " gave_up "),
    (re.compile(r"\b(?:has|have|had) been\b"), " "),
    (re.compile(r"\byears? old\b"), " age "),
    (re.compile(r"\b(?:fond of|keen on|a fan of|a big fan of)\b"), " like "),
    (re.compile(r"\b(?:vs code|visual studio code)\b"), " vscode "),
    (re.compile(r"\b(?:rather than|instead of)\b"), " instead "),
    (re.compile(r"\bgo(?:es)? by\b"), " name "),
    (re.compile(r"\b(work(?:s|ed|ing)?) for\b"), r"\1 at"),  # "works for Amazon" is "works at Amazon"
    (re.compile(r"^((?:is|am|are|turned|turns) \S+)$"), r"\1 age"),  # "is 41": a bare number is an age
    (re.compile(r"\btwice\b"), " 2 times "),
    (re.compile(r"\bthrice\b"), " 3 times "),
)


# Counts compare as digits: "three children" and "3 kids", "两个孩子" and "2个孩子" say the same number.
EN_NUMBERS = {
    word: str(number)
    for number, word in enumerate(
        ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")
    )
}
EN_NUMBER = re.compile(r"\b(" + "|".join(EN_NUMBERS) + r")\b(?! of\b)")
ZH_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
# A Chinese numeral is a number only before a measure word: "一起", "十分", "一直" are words of their own.
ZH_ORDINAL = re.compile(r"第(\d+)(?=[个只条位])")  # "有了第二个孩子": the second child makes two
ZH_NUMBER = re.compile("([零一二两三四五六七八九十百]+)(?=[个只条名位岁次点年天周本家口套辆台门种号月倍间])")


NEGATIONS = frozenset(
    {
        "not", "no", "never", "no_longer", "anymore", "used_to", "gave_up", "formerly", "previously",
        "stop", "stops", "stopped", "stopping", "quit", "quits", "quitting",
        "不再", "再也不", "从不", "从来不", "没", "不", "别", "停止", "停用", "戒掉", "戒了", "戒", "不会",
    }
)  # fmt: skip


NEGATIONS_AT_START = frozenset({"以前", "过去"})  # "我以前住在…" denies the present; "上线以前" is just "before"


# Words that deny another word: "hates tea" reads as "not likes tea", "没有车" as "not 有车".
DENIALS = {
    **{
        word: "like"
        for word in ("hate", "hates", "hated", "hating", "dislike", "dislikes", "disliked", "disliking", "detest",
                     "detests", "detested", "讨厌", "厌恶")
    },
    "没有": "有",
    "sold": "own",  # "sold the house" denies "owns a house"
}  # fmt: skip


SOFT_WORDS = frozenset(
    {
        "a", "an", "the", "do", "really", "very", "also", "still", "currently", "now", "nowadays", "just",
        "actually", "always", "usually", "generally", "mostly", "definitely", "strongly", "quite", "all", "every",
        "each", "so", "too", "much", "lot", "i", "me", "my", "mine", "myself", "we", "our", "ours", "will", "would",
        "shall", "can", "could", "please", "then", "some", "but", "only",
        "的", "了", "地", "得", "也", "还", "都", "很", "非常", "一直", "总是", "现在", "目前", "来", "着", "呢", "吧",
        "啊", "呀", "嘛", "我", "我们", "咱们", "今年", "平时", "通常", "一般", "比较", "特别", "真的", "正在", "已经",
        "就", "才", "更", "但是", "可是", "还是", "对于", "关于", "由于", "终于", "以前", "过去", "每天",
    }
)  # fmt: skip


# Chinese words worth keeping whole, with their key; every other Chinese character is a token of its own.
CJK_WORDS = {
    "喜欢": "like", "喜爱": "like", "热爱": "like", "偏好": "like", "偏爱": "like", "更喜欢": "like",
    "最喜欢": "favorite", "最爱": "favorite",
    "使用": "use", "采用": "use", "利用": "use", "用": "use",
    "居住": "live", "生活": "live", "住": "live",
    "工作": "work", "上班": "work", "任职": "work", "就职": "work",
    "名字": "name", "名叫": "name", "叫做": "name", "叫": "name",
    "养": "have", "宠物": "pet",
    "是": "be", "有": "have", "在": "in", "于": "in", "来自": "from", "出生": "born", "岁": "age", "年龄": "age",
    "和": "and", "与": "and", "跟": "and", "及": "and", "比": "than", "而不是": "instead",
    # words that contain a lexicon character but mean something else
    "用户": "用户", "应用": "应用", "不错": "不错", "不同": "不同", "不过": "不过", "不仅": "不仅", "不但": "不但",
    "不断": "不断", "不少": "不少", "不久": "不久", "不管": "不管", "存在": "存在", "戒指": "戒指",
    "会议": "会议", "开会": "开会", "社会": "社会", "机会": "机会", "学会": "学会",
}  # fmt: skip


# Lemmas of irregular forms, which a stemmer cannot reach ("went" -> "go"); looked up before stemming, and the lemma
# is stemmed like any word. Each lemma is its own stem, as a test checks.
IRREGULAR = {
    "am": "be", "is": "be", "are": "be", "was": "be", "were": "be", "been": "be", "being": "be", "be": "be",
    "has": "have", "had": "have", "having": "have", "does": "do", "did": "do", "done": "do", "doing": "do",
    "went": "go", "gone": "go", "goes": "go", "came": "come", "made": "make", "wrote": "write", "written": "write",
    "ran": "run", "born": "born", "left": "left", "children": "child", "people": "person",
}  # fmt: skip


# Words the stemmer would merge with an attribute word of another meaning: "likely" is no liking ("like"), "lovely"
# no love, "useful" no use; kept whole.
UNSTEMMED = frozenset({"likely", "lovely", "lively", "namely", "useful", "utility", "utilities", "adorable"})


ALIASES = {"postgres": "postgresql", "js": "javascript", "ts": "typescript", "k8s": "kubernetes"}


# Stems (core.stemming.stem: "loves" -> "love", "based" -> "base") that mean the same for this purpose, with the key
# they share; like/love/enjoy/prefer all state a liking. A stem that is its key ("like", "use", "live") needs no entry.
SYNONYMS = {
    "love": "like", "enjoy": "like", "prefer": "like", "ador": "like",
    "util": "use", "utilis": "use",
    "resid": "live", "base": "live",
    "employ": "work", "job": "work",
    "call": "name", "kid": "child",
    "favorit": "favorite", "favourit": "favorite", "colour": "color",
}  # fmt: skip


PREFER_STEMS = frozenset({"prefer", "偏好", "偏爱", "更喜欢"})  # "prefers" picks one value, "likes" does not


# Frame words hold a statement together; they are not what it is about.
FRAME_KEYS = frozenset(
    {"be", "in", "at", "for", "on", "of", "to", "by", "with", "from", "as", "and", "or", "about", "into", "than",
     "over", "instead"}
)  # fmt: skip


# Attribute words say which property a fact sets; the rest of its content is the value.
ATTRIBUTE_KEYS = frozenset({"use", "like", "live", "work", "name", "have", "favorite", "age", "born", "come"})


# With these, "A over B" and "B over A" say different things: word order counts.
ORDER_KEYS = frozenset({"over", "than", "instead", "from", "to"})
COMPARISON_KEYS = frozenset({"over", "than", "instead"})


CHANGEABLE_FAMILIES = frozenset({"use", "prefer", "live", "work"})
CJK_CHAR = re.compile(f"[{CJK}]")


_LATIN_WORD = f"[^\\W_{CJK}]+(?:[+#]+)?(?:[-._'@][^\\W_{CJK}]+[+#]*)*"  # "c++", "node.js", "a@b.com"
DATE = re.compile(r"\d{4}-\d{1,2}-\d{1,2}")


_CJK_LEXICON = sorted(
    {word for word in (*CJK_WORDS, *NEGATIONS, *NEGATIONS_AT_START, *DENIALS, *SOFT_WORDS) if CJK_CHAR.match(word)},
    key=len,
    reverse=True,
)


TOKEN = re.compile("|".join([*_CJK_LEXICON, f"[{CJK}]", _LATIN_WORD]))
_EN_CHANGE_VERB = (
    r"(?P<verb>switch(?:ed|es|ing)?|mov(?:e|ed|es|ing)|migrat(?:e|ed|es|ing)|chang(?:e|ed|es|ing)"
    r"|relocat(?:e|ed|es|ing)|transition(?:ed|s|ing)?|convert(?:ed|s|ing)?)"
)


_OBJECT_WORDS = r"(?:[\w.+#]+\s+){0,3}?"  # "moved our database from X to Y"
_ZH_CHANGE_VERB = "|".join(
    ("换成", "换到", "换为", "改成", "改为", "改用", "转到", "转向", "转用", "转为", "迁移到", "迁到", "搬到", "搬去",
     "搬家到", "切换到", "切换成", "切到", "跳槽到", "换用", "改到", "调到", "挪到")
)  # fmt: skip


# Each pattern names the change marker (verb), the new value Y and, when stated, the old value X; a new pattern's
# marker goes into CHANGE_MARKER below too (test_every_text_a_change_pattern_matches_has_a_change_marker).
CHANGE_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(pattern)
    for pattern in (
        rf"\b{_EN_CHANGE_VERB}\s+{_OBJECT_WORDS}from\s+(?P<old>.+?)\s+(?:over\s+)?(?:to|into)\s+(?P<new>.+)",
        rf"\b{_EN_CHANGE_VERB}\s+{_OBJECT_WORDS}(?:over\s+)?to\s+(?P<new>.+?)\s+from\s+(?P<old>.+)",
        r"\b(?P<verb>replac(?:e|ed|es|ing))\s+(?P<old>.+?)\s+(?:with|by)\s+(?P<new>.+)",
        r"\b(?P<verb>left|quit)\s+(?P<old>.+?)\s+(?:and\s+(?:joined|started at|started working at|went to)|for)\s+"
        r"(?P<new>.+)",
        r"(?P<old>.+?)\s+(?:was|were|is|are|got|has been|have been)\s+(?P<verb>replaced)\s+(?:with|by)\s+(?P<new>.+)",
        r"(?P<new>.+?)\s+(?P<verb>instead of|rather than)\s+(?P<old>.+)",
        r"\b(?P<verb>no longer|not)\s+(?P<old>.+?)(?:\s+any ?more)?(?:\s*[,;]\s*|\s+)(?:(?:and|but)\s+)?"
        r"(?:now|instead)\s+(?P<new>.+)",
        r"\b(?P<verb>no longer|not)\s+(?!only\b)(?P<old>.+?)(?:\s+any ?more)?\s*,?\s+but\s+(?P<new>.+)",
        rf"\b{_EN_CHANGE_VERB}\s+{_OBJECT_WORDS}(?:over\s+)?to\s+(?P<new>.+)",
        r"\b(?P<verb>now)\s+(?P<new>(?:uses?|using|prefers?|preferring|lives?|living|works?|working|is based"
        r"|based|resides?|residing)\b.+)",
        rf"从(?P<old>.+?)(?P<verb>{_ZH_CHANGE_VERB})了?(?P<new>.+)",
        "把(?P<old>.+?)(?P<verb>换成|替换成|替换为|改成|改为|换为|迁移到)了?(?P<new>.+)",
        "(?:用|使用)(?P<new>.+?)(?P<verb>代替|取代|替换|替代)了?(?P<old>.+)",
        "(?P<new>.+?)(?P<verb>而不是)(?P<old>.+)",
        "(?P<verb>不再)(?P<old>.+?)[,;]\\s*(?:而是|而)?(?:改用|换成|换用|改成|改为|转用|现在)(?P<new>.+)",
        f"(?P<verb>{_ZH_CHANGE_VERB})了?(?P<new>.+)",
        "(?P<verb>现在)(?P<new>(?:用|使用|住在|住|在|偏好|更喜欢).+)",
    )
)
# A marker one of CHANGE_PATTERNS needs (a text without any matches none): most facts have none, and the patterns
# themselves, trying every start position, were most of judging a new fact by the rules.
CHANGE_MARKER = re.compile(
    rf"\b{_EN_CHANGE_VERB}|replac|\b(?:left|quit|no longer|not|now)\b|instead of|rather than"
    rf"|{_ZH_CHANGE_VERB}|替换|代替|取代|替代|而不是|不再|现在"
)


# Markers that change one attribute by themselves, English ones by the stem of their first word ("relocated" ->
# "reloc"); every other marker ("switched", "换成") names none.
MARKER_FAMILIES = {
    "move": frozenset({"live"}), "reloc": frozenset({"live"}), "migrat": frozenset({"use"}),
    "搬到": frozenset({"live"}), "搬去": frozenset({"live"}), "搬家到": frozenset({"live"}),
    "改用": frozenset({"use"}), "换用": frozenset({"use"}), "转用": frozenset({"use"}),
    "迁移到": frozenset({"use"}), "迁到": frozenset({"use"}), "跳槽到": frozenset({"work"}),
    "left": frozenset({"work"}), "quit": frozenset({"work"}),
}  # fmt: skip


# Change markers are looked for in statements, not in long notes (where the lazy patterns also get slow).
MAX_CHANGE_TEXT = 300
# A marker past the first words is seldom the fact's change: "works to bring positive changes to the community".
MAX_WORDS_BEFORE_CHANGE = 4


# Certainty of "switched to Y" against another value of the attribute the marker names ("moved to", "now uses").
NAMED_CHANGE_CERTAINTY = {"live": 0.85, "work": 0.85, "use": 0.65, "prefer": 0.65}


# A marker that names no attribute ("switched to", "换成") is taken to change a tool or a preference, never a home
# or an employer: those are changed with words of their own ("moved to", "搬到", "joined").
UNNAMED_CHANGE_FAMILIES = frozenset({"use", "prefer"})
UNNAMED_CHANGE_CERTAINTY = 0.6


# Kinds a fact may name instead of the thing: "has no pets" denies "has a cat".
# Words, stemmed when looked up (analysis.word_stem), to the kind they are of.
HYPERNYMS = {
    **{
        word: "pet"
        for word in ("cat", "dog", "puppy", "kitten", "hamster", "parrot", "rabbit", "bunny", "guinea", "turtle",
                     "tortoise", "snake", "lizard", "ferret", "猫", "狗", "鹦", "兔", "仓", "龟")
    },
    **{word: "sibling" for word in ("sister", "brother", "姐", "妹", "哥", "弟")},
    **{word: "child" for word in ("son", "daughter", "kid", "儿", "女")},
    **{
        word: "alcohol"
        for word in ("wine", "beer", "whisky", "whiskey", "vodka", "gin", "rum", "cocktail", "sake", "酒")
    },
}  # fmt: skip


# What a negated fact says once its circumstances are left out: "quit smoking last year because of the cost" denies
# "smokes"; the time and the reason are not part of what it denies.
CLAUSE_KEYS = frozenset({"becaus", "sinc", "due", "因为", "所以"})  # not "after", "when": they narrow the scope
TIME_KEYS = frozenset({"last", "year", "month", "week", "ago", "yesterday", "recent", "去", "年", "上", "月"})


# A change said by "now" alone: "drives a Toyota now" after "drives a BMW" (but "now also" adds a value).
NOW = re.compile(r"\bnow\b|\bthese days\b|现在|如今")
ALSO = re.compile(r"\balso\b|\btoo\b|\bas well\b|也|还")


# Particles that end a phrase, never a word: a quoted value stops before them ("搬到重庆了" quotes "重庆").
PARTICLES = frozenset("了的地得着呢吧啊呀嘛过")


# A plan is not a change yet: "wants to move to Lisbon" leaves "lives in Porto" true.
PLAN = re.compile(
    r"\b(?:wants?|wanting|plans?|planning|hopes?|hoping|intends?|intending|would like|going|considering|thinking"
    r"|might|may|will|dreams?)\b|打算|计划|想|准备|希望|考虑|将要|要去"
)


# An exclusive state: one member of a class at a time (looked for in the fact's text, subject dropped, affirmative
# facts only). A fact naming two members of one class ("retired, now works part time") names none.
EXCLUSIVE_STATES: dict[str, dict[str, re.Pattern[str]]] = {
    "diet": {
        "vegan": re.compile(r"\bvegan\b|纯素"),
        "vegetarian": re.compile(r"\bvegetarian\b|吃素|素食"),
        "pescatarian": re.compile(r"\bpescatarian\b"),
        "eats meat": re.compile(
            r"\beat(?:s|ing)? (?:meat|beef|pork|chicken|steak|bacon)\b|\bmeat eater\b|吃(?:牛|猪|羊|鸡)?肉|吃牛排"
        ),
    },
    "relationship status": {
        "single": re.compile(r"\bsingle\b|单身"),
        "married": re.compile(r"\bmarried\b|已婚|结婚"),
        "divorced": re.compile(r"\bdivorced\b|离婚|离异"),
        "engaged": re.compile(r"\bengaged\b|订婚"),
        "widowed": re.compile(r"\bwidow(?:ed|er)?\b|丧偶"),
        "in a relationship": re.compile(
            r"\bhas an? (?:girlfriend|boyfriend|partner)\b|\bdating\b|有(?:女|男)朋友|在谈恋爱"
        ),
        "broke up": re.compile(r"\bbroke up\b|\bsplit up\b|\bseparated\b|分手|分居"),
    },
    "employment": {
        "retired": re.compile(r"\bretired\b|退休"),
        "unemployed": re.compile(r"\bunemployed\b|\bout of work\b|失业|待业"),
        "left the job": re.compile(r"\bquit (?:the|a|my|his|her|their) job\b|\bresigned\b|辞职|离职"),
        # "works as a nurse", "在银行工作"; not "writes Python at work", "工作中写Python"
        "works": re.compile(r"\bwork(?:s|ing)? (?:at|as|in)\b|\bemployed\b|在.+?(?:工作|上班)|(?:工作|上班)了?$"),
    },
}


# The head nouns of an occupation: "is a data scientist" and "is a software engineer" name two jobs.
OCCUPATIONS_EN = frozenset(
    {"engineer", "developer", "programmer", "scientist", "teacher", "lecturer", "professor", "nurse", "doctor",
     "physician", "surgeon", "lawyer", "attorney", "accountant", "designer", "manager", "consultant", "analyst", "chef",
     "cook", "writer", "student", "researcher", "architect", "pilot", "dentist", "pharmacist", "firefighter",
     "mechanic", "electrician", "plumber", "driver", "barista", "waiter", "waitress", "artist", "photographer",
     "journalist", "editor", "therapist", "officer", "clerk", "cashier", "tutor", "librarian", "veterinarian", "vet",
     "musician", "translator", "administrator", "technician", "intern", "founder", "ceo", "cto", "owner"}
)  # fmt: skip
OCCUPATIONS_ZH = (
    "老师", "教师", "教授", "工程师", "程序员", "经理", "医生", "护士", "律师", "会计", "设计师", "学生", "研究员",
    "厨师", "司机", "记者", "编辑", "销售", "公务员", "科学家", "分析师", "顾问", "建筑师", "警察", "店员", "老板",
    "创始人", "实习生", "翻译", "讲师", "主管", "总监",
)  # fmt: skip
ROLE_EN = re.compile(
    r"^(?:is|am|are|works? as|working as|job is|occupation is)\s+(?:now\s+|currently\s+)?(?:an?\s+)?"
    r"(?P<role>[\w\s-]+?)"
    r"(?:\s+(?:at|in|for|with|by)\s+.+)?$"
)
ROLE_ZH = re.compile(
    "^(?:是|当|做|担任|在.+?(?:当|做|担任))(?:一名|一位|一个|1名|1位|1个|名|位|个)?"
    f"(?P<role>.*?(?:{'|'.join(OCCUPATIONS_ZH)}))了?$"
)
