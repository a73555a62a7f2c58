"""Relative dates made absolute from the time of the conversation: "next Friday" -> "on 2023-05-12", "下周五"."""

import re
from datetime import date, timedelta

from .patterns import en

ZH_DAY_WORD = "今天|今晚|明天|后天|昨天|前天|(?:下|上|这|本)个?(?:周|星期|礼拜)[一二三四五六日天]?"
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


_ZH_WEEKDAYS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_DAY_OFFSETS = {"today": 0, "tonight": 0, "tomorrow": 1, "yesterday": -1}


_ZH_DAY_OFFSETS = {"今天": 0, "今晚": 0, "明天": 1, "后天": 2, "昨天": -1, "前天": -2}
_PREPOSITION = r"(?:(?P<prep>on|by|until|till|before|after|from|since)\s+)?"


_EN_DAY = en(rf"\b{_PREPOSITION}(?P<word>today|tonight|tomorrow|yesterday)\b")
_EN_WEEKDAY = en(rf"\b{_PREPOSITION}(?P<which>next|last|this|coming)\s+(?P<day>{'|'.join(_WEEKDAYS)})\b")


_EN_WEEK = en(r"\b(?:(?P<prep>in|during|by|until|from)\s+)?(?P<which>next|last|this)\s+week\b")
_ZH_DAY = re.compile("|".join(_ZH_DAY_OFFSETS))


_ZH_WEEKDAY = re.compile("(?P<which>下|上|这|本)个?(?:周|星期|礼拜)(?P<day>[一二三四五六日天])")
_ZH_WEEK = re.compile("(?P<which>下|上|这|本)个?(?:周|星期|礼拜)(?![一二三四五六日天])")


_WEEK_SHIFT = {"next": 1, "last": -1, "this": 0, "下": 1, "上": -1, "这": 0, "本": 0}


def _monday(day: date, weeks: int = 0) -> date:
    return day - timedelta(days=day.weekday()) + timedelta(weeks=weeks)


def _en_weekday(today: date, which: str, weekday: int) -> date:
    """ "next Friday" is Friday of next week, "this Friday" of this week; "last"/"coming" are the nearest ones."""
    if which == "last":
        return today - timedelta(days=(today.weekday() - weekday - 1) % 7 + 1)
    if which == "coming":
        return today + timedelta(days=(weekday - today.weekday() - 1) % 7 + 1)
    return _monday(today, _WEEK_SHIFT[which]) + timedelta(days=weekday)


def resolve_dates(text: str, today: date) -> str:
    def en_day(match: re.Match[str]) -> str:
        day = today + timedelta(days=_DAY_OFFSETS[match["word"].lower()])
        return f"{(match['prep'] or 'on').lower()} {day.isoformat()}"

    def en_weekday(match: re.Match[str]) -> str:
        day = _en_weekday(today, match["which"].lower(), _WEEKDAYS.index(match["day"].lower()))
        return f"{(match['prep'] or 'on').lower()} {day.isoformat()}"

    def en_week(match: re.Match[str]) -> str:
        monday = _monday(today, _WEEK_SHIFT[match["which"].lower()])
        return f"{(match['prep'] or 'in').lower()} the week of {monday.isoformat()}"

    text = _EN_DAY.sub(en_day, text)
    text = _EN_WEEKDAY.sub(en_weekday, text)
    text = _EN_WEEK.sub(en_week, text)
    text = _ZH_DAY.sub(lambda m: (today + timedelta(days=_ZH_DAY_OFFSETS[m.group()])).isoformat(), text)
    text = _ZH_WEEKDAY.sub(
        lambda m: (_monday(today, _WEEK_SHIFT[m["which"]]) + timedelta(days=_ZH_WEEKDAYS[m["day"]])).isoformat(), text
    )
    return _ZH_WEEK.sub(lambda m: f"{_monday(today, _WEEK_SHIFT[m['which']]).isoformat()}那周", text)


def names_a_day(text: str) -> bool:
    return any(pattern.search(text) for pattern in (_EN_DAY, _EN_WEEKDAY, _EN_WEEK, _ZH_DAY, _ZH_WEEKDAY, _ZH_WEEK))


def day_referred_to(text: str, today: date) -> date | None:
    """The first day the text names, made absolute ("last Monday", "下周五"; a week is its Monday), or None."""
    found: list[tuple[int, date]] = []
    for match in _EN_DAY.finditer(text):
        found.append((match.start(), today + timedelta(days=_DAY_OFFSETS[match["word"].lower()])))
    for match in _EN_WEEKDAY.finditer(text):
        day = _en_weekday(today, match["which"].lower(), _WEEKDAYS.index(match["day"].lower()))
        found.append((match.start(), day))
    for match in _EN_WEEK.finditer(text):
        found.append((match.start(), _monday(today, _WEEK_SHIFT[match["which"].lower()])))
    for match in _ZH_DAY.finditer(text):
        found.append((match.start(), today + timedelta(days=_ZH_DAY_OFFSETS[match.group()])))
    for match in _ZH_WEEKDAY.finditer(text):
        found.append(
            (match.start(), _monday(today, _WEEK_SHIFT[match["which"]]) + timedelta(days=_ZH_WEEKDAYS[match["day"]]))
        )
    for match in _ZH_WEEK.finditer(text):
        found.append((match.start(), _monday(today, _WEEK_SHIFT[match["which"]])))
    return min(found)[1] if found else None
