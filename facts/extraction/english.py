"""The English statements the offline extractor keeps, in the order they are tried (the specific first)."""

from .patterns import ADV, Pattern, attribute_category, en, third_person

# A place, without what the speaker adds after it: "in Kyoto these days, commuting is easier" -> "in Kyoto".
PLACE = r"(?P<rest>[^,;]+?)(?:\s+(?:now|these days|nowadays|at the moment|currently|for now))?(?:\s*[,;].*)?$"


# "Always good to hear", "Never saw this coming": always/never without a verb to follow is not a procedure.
_NOT_A_VERB = (
    r"(?!(?:good|great|nice|fun|happy|glad|here|there|up|down|a|an|the|so|too|been|saw|knew|thought|felt|had|was"
    r"|were|is|am|ready|welcome|true|easy|hard|better|worse|say|mind)\b)(?![a-z]+ed\b)"
)


def _verb_of(match) -> str:
    """ "I always use dark mode" -> "Always uses dark mode"; the imperative "Always run the tests" stays."""
    verb = match["verb"]
    return third_person(verb) if (match["subject"] or "").lower() == "i" else verb


ENGLISH_STATEMENTS: tuple[Pattern, ...] = (
    # procedures
    Pattern(
        en(r"^(?:please\s+)?(?:always\s+)?(?:remember|don't forget|do not forget)\s+to\s+(?P<rest>.+)"),
        lambda m: f"Remember to {m['rest']}",
        "procedure",
        0.9,
    ),
    Pattern(
        en(
            rf"^(?:please\s+)?(?:(?P<subject>i|we)\s+)?(?P<adv>always|never)\s+{_NOT_A_VERB}(?P<verb>[\w'-]+)(?P<rest>.*)"
        ),
        lambda m: f"{m['adv'].capitalize()} {_verb_of(m)}{m['rest']}",
        "procedure",
        0.8,
    ),
    # preferences
    Pattern(
        en(
            rf"^i\s+{ADV}(?:do not|don't|dont)\s+{ADV}(?P<verb>like|love|enjoy|use|want|have|own|eat|drink)"
            r"\s+(?P<rest>.+)"
        ),
        lambda m: f"Doesn't {m['verb'].lower()} {m['rest']}",
        lambda m: "profile" if m["verb"].lower() in ("have", "own") else "preference",
        0.85,
    ),
    Pattern(
        en(rf"^i\s+{ADV}(?P<verb>hate|dislike|detest|can't stand|cannot stand)\s+(?P<rest>.+)"),
        lambda m: f"{third_person(m['verb'])} {m['rest']}",
        "preference",
        0.85,
    ),
    Pattern(
        en(rf"^i\s+{ADV}(?P<verb>prefer|like|love|enjoy|adore)\s+(?P<rest>.+)"),
        lambda m: f"{third_person(m['verb'])} {m['rest']}",
        "preference",
        0.85,
    ),
    Pattern(
        en(rf"^i(?:'m|\s+am)\s+{ADV}(?:using|working with)\s+(?P<rest>.+)"),
        lambda m: f"Uses {m['rest']}",
        "preference",
        0.8,
    ),
    Pattern(en(rf"^i\s+{ADV}use\s+(?P<rest>.+)"), lambda m: f"Uses {m['rest']}", "preference", 0.8),
    # profile
    Pattern(
        en(rf"^i(?:'m|\s+am)?\s+{ADV}(?:work|working)\s+(?P<prep>at|for|as|in|on|with)\s+(?P<rest>.+)"),
        lambda m: f"Works {m['prep'].lower()} {m['rest']}",
        lambda m: "project" if m["prep"].lower() in ("on", "with") else "profile",
        0.85,
    ),
    Pattern(
        en(rf"^i(?:'m|\s+am)?\s+{ADV}(?:live|living|reside|residing)\s+in\s+{PLACE}"),
        lambda m: f"Lives in {m['rest']}",
        "profile",
        0.85,
    ),
    Pattern(
        en(rf"^i(?:'m|\s+am)\s+{ADV}based\s+in\s+{PLACE}"),
        lambda m: f"Is based in {m['rest']}",
        "profile",
        0.85,
    ),
    Pattern(
        en(rf"^i(?:'ve|\s+have)?\s+{ADV}(?:moved|relocated)\s+to\s+{PLACE}"),
        lambda m: f"Moved to {m['rest']}",
        "profile",
        0.85,
    ),
    Pattern(
        en(rf"^i(?:'m|\s+am)\s+{ADV}(?P<rest>allergic\s+to\s+.+)"),
        lambda m: f"Is {m['rest']}",
        "profile",
        0.85,
    ),
    Pattern(
        en(
            rf"^i(?:'m|\s+am)\s+{ADV}(?:an?\s+)?(?P<rest>(?:vegetarian|vegan|pescatarian|married|single|divorced"
            r"|engaged|pregnant|retired|widowed|unemployed|self-employed)\b.*)"
        ),
        lambda m: f"Is {m['rest']}",
        "profile",
        0.85,
    ),
    Pattern(
        en(
            r"^(?:i|we)(?:'ve|\s+have)(?:\s+got)?\s+(?P<rest>(?:a|an|one|two|three|four|five|six|\d+|no)\s+(?:\w+\s+)?"
            r"(?:kids?|child|children|sons?|daughters?|dogs?|cats?|pets?|puppy|puppies|kittens?|brothers?|sisters?"
            r"|siblings?|grandchildren|grandkids|parrots?|rabbits?|horses?|fish|hamsters?|turtles?|snakes?)\b.*)"
        ),
        lambda m: f"Has {m['rest']}",
        "profile",
        0.85,
    ),
    Pattern(
        en(r"^(?:my\s+name\s+is|my\s+name's|i(?:'m|\s+am)\s+called|(?:please\s+)?call\s+me)\s+(?P<rest>.+)"),
        lambda m: f"Name is {m['rest']}",
        "profile",
        0.85,
    ),
    Pattern(
        en(r"^i(?:'m|\s+am)\s+(?P<age>\d{1,3})(?:\s+(?:years?\s+old|yo))?$"),
        lambda m: f"Is {m['age']} years old",
        "profile",
        0.85,
    ),
    Pattern(
        en(rf"^i(?:'m|\s+am)\s+{ADV}(?P<article>an?)\s+(?!bit\b|little\b|lot\b|fan\b)(?P<rest>.+)"),
        lambda m: f"Is {m['article'].lower()} {m['rest']}",
        "profile",
        0.8,
    ),
    Pattern(
        en(r"^my\s+(?P<attribute>[^,.;:!?]{1,40}?)\s+(?P<verb>is|are)\s+(?P<rest>.+)"),
        lambda m: f"{m['attribute']} {m['verb'].lower()} {m['rest']}",
        lambda m: attribute_category(m["attribute"]),
        0.85,
    ),
    # decisions
    Pattern(
        en(
            rf"^(?:we|i)(?:'ve|\s+have)?\s+{ADV}(?:finally\s+)?(?P<verb>decided|agreed|chose|settled)"
            r"(?:\s+(?P<how>to|on|that|upon))?\s+(?P<rest>.+)"
        ),
        lambda m: " ".join(part for part in (m["verb"].capitalize(), (m["how"] or "").lower(), m["rest"]) if part),
        "decision",
        0.85,
    ),
    # projects
    Pattern(
        en(
            rf"^we(?:'re|\s+are)\s+{ADV}(?:going\s+to\s+)?(?:moving|migrating|switching|transitioning|move|migrate"
            r"|switch)\s+(?P<rest>(?:from\s+.+?\s+)?to\s+.+)"
        ),
        lambda m: f"Moving {m['rest']}",
        "project",
        0.8,
    ),
    Pattern(
        en(
            rf"^we(?:'ve|\s+have)?\s+{ADV}(?P<verb>switched|migrated|moved)"
            r"\s+(?P<rest>(?:[\w.+#-]+\s+){0,3}?(?:from\s+.+?\s+)?to\s+.+)"
        ),
        lambda m: f"{m['verb'].capitalize()} {m['rest']}",
        "project",
        0.85,
    ),
    Pattern(
        en(rf"^we\s+{ADV}(?P<negation>no longer|don't|do not)\s+use\s+(?P<rest>.+)"),
        lambda m: ("No longer uses" if m["negation"].lower() == "no longer" else "Doesn't use") + f" {m['rest']}",
        "project",
        0.8,
    ),
    Pattern(
        en(rf"^we(?:'re|\s+are)?\s+{ADV}(?:use|using)\s+(?P<rest>.+)"), lambda m: f"Uses {m['rest']}", "project", 0.8
    ),
    Pattern(
        en(
            r"^our\s+(?P<rest>(?:project|app|application|service|team|codebase|repo|repository|backend|frontend"
            r"|stack|company|product|api|website|site|database|db|ci|pipeline)\b.+)"
        ),
        lambda m: m["rest"],
        "project",
        0.8,
    ),
    Pattern(
        en(
            r"^we(?:'ll|\s+will|'re going to|\s+are going to|\s+plan to|\s+want to|\s+need to|\s+have to|\s+should"
            r"|\s+must)?\s+(?P<rest>.+)"
        ),
        lambda m: m["rest"],
        "project",
        0.7,
        needs_date=True,
    ),
)
