"""The fixed questions, and for each the truth read from the backend and the check that
an answer states it.

Every check asks the backend's API directly (with a token for the MCP server's client)
before the question is put to the model, and looks for one key fact in the answer: a
count, a time, a name. An answer that states the fact in other words than these checks
know (say "two dozen" for 24) is counted wrong: read the answers in the run's
results.jsonl before quoting a figure.
"""

import datetime
import json
import re
import urllib.parse
import urllib.request

SMALL = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen "
    "fourteen fifteen sixteen seventeen eighteen nineteen"
).split()
TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()


def number_words(n: int) -> list[str]:
    """How an answer may write n: digits, or English words below 100."""
    forms = [str(n)]
    if 0 <= n < 20:
        forms.append(SMALL[n])
    elif 20 <= n < 100:
        tens, ones = divmod(n, 10)
        word = TENS[tens - 2]
        forms += [word] if ones == 0 else [f"{word}-{SMALL[ones]}", f"{word} {SMALL[ones]}"]
    return forms


def states_number(answer: str, n: int) -> bool:
    text = answer.lower()
    return any(re.search(rf"(?<![\w.,]){re.escape(f)}(?![\w]|[.,]\d)", text) for f in number_words(n))


TIME = re.compile(
    r"\b(\d{1,2})(?:[:.h](\d{2}))?\s*(a\.?m\.?|p\.?m\.?)?(?![\d])", re.IGNORECASE
)


def times_in(answer: str) -> set[str]:
    """Every clock time an answer names, as HH:MM (24 h): 17:30, 5:30 PM, 5 pm, noon."""
    found = set()
    text = answer.lower()
    if "noon" in text:
        found.add("12:00")
    if "midnight" in text:
        found.add("00:00")
    for m in TIME.finditer(answer):
        hour, minute, half = int(m.group(1)), m.group(2), (m.group(3) or "").lower()
        if minute is None and not half:
            continue  # a bare number is not a time
        minute = int(minute or 0)
        if half.startswith("p") and hour < 12:
            hour += 12
        if half.startswith("a") and hour == 12:
            hour = 0
        if hour < 24 and minute < 60:
            found.add(f"{hour:02d}:{minute:02d}")
    return found


class Backend:
    def __init__(self, base: str, token: str):
        self.base, self.token = base.rstrip("/"), token

    def get(self, path: str, **query):
        url = f"{self.base}{path}"
        if query:
            url += "?" + urllib.parse.urlencode(query)
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response), response.headers


def next_open_day(backend: Backend) -> dict:
    """Tomorrow, or the first day after it that the restaurant opens: its periods."""
    tomorrow = (datetime.datetime.now(datetime.timezone.utc).date() + datetime.timedelta(days=1)).isoformat()
    periods, _ = backend.get("/opening-hours", limit=100)
    by_day: dict[str, list] = {}
    for p in periods:
        if p["date"] >= tomorrow and p.get("isOpen"):
            by_day.setdefault(p["date"], []).append(p)
    day = min(by_day)
    return {"date": day, "periods": sorted(by_day[day], key=lambda p: p["opens"])}


def q_customers(backend, day):
    _, headers = backend.get("/customers", limit=1)
    total = int(headers["x-total-count"])
    return (
        "How many customers do we have?",
        f"{total}",
        lambda answer: states_number(answer, total),
    )


def q_tables(backend, day):
    _, headers = backend.get("/tables", limit=1)
    total = int(headers["x-total-count"])
    return (
        "How many tables are there?",
        f"{total}",
        lambda answer: states_number(answer, total),
    )


def q_hours(backend, day):
    opens, closes = day["periods"][0]["opens"], day["periods"][-1]["closes"]
    return (
        f"What are the opening hours on {day['date']}?",
        f"opens {opens}, closes {closes}",
        lambda answer: {opens, closes} <= times_in(answer),
    )


def q_bookings(backend, day):
    bookings, _ = backend.get("/bookings", fromDateTime=day["date"], toDateTime=day["date"], limit=100)
    total = len(bookings)
    standing = sum(1 for b in bookings if b["status"] not in ("canceled", "declined", "no_show"))
    return (
        f"How many bookings are there on {day['date']}?",
        f"{total} ({standing} not cancelled or declined)",
        lambda answer: states_number(answer, total) or states_number(answer, standing),
    )


def q_feedback(backend, day):
    items, _ = backend.get("/feedback", limit=1)
    latest = items[0]
    words = {w for w in re.findall(r"[a-z]{4,}", latest["comment"].lower())}
    return (
        "What did guests say in their latest feedback?",
        f"\"{latest['comment']}\" ({latest['rating']}/5)",
        lambda answer: bool(words)
        and sum(w in answer.lower() for w in words) * 2 >= len(words),
    )


def q_availability(backend, day):
    times, _ = backend.get("/bookings/available-times", date=day["date"], people=2)
    free = set(times)
    if not free:
        return (
            f"Is there a table for 2 people on {day['date']}? Which times are free?",
            "nothing free",
            lambda answer: re.search(r"\b(no|not|none|fully)\b", answer.lower()) is not None,
        )
    return (
        f"Is there a table for 2 people on {day['date']}? Which times are free?",
        f"{len(times)} start times, {times[0]} to {times[-1]}",
        lambda answer: bool(free & times_in(answer)),
    )


# name -> (build, the tools that answer it)
QUESTIONS = {
    "customers": (q_customers, {"getCustomers"}),
    "tables": (q_tables, {"getTables"}),
    "hours": (q_hours, {"getOpeningHours"}),
    "bookings": (q_bookings, {"getBookings"}),
    "feedback": (q_feedback, {"getFeedback"}),
    "availability": (q_availability, {"getAvailableTimes", "findAvailability", "getAvailableDates"}),
}

# Markup that must never reach the person: a tool call written as text, or the
# template's own tokens.
LEAKS = [
    ("<tool_call>", re.compile(r"</?tool_call>")),
    ("functions.", re.compile(r"\bfunctions\.[A-Za-z_]")),
    ("name+arguments JSON", re.compile(r"\"name\"\s*:.*\"arguments\"|\"arguments\"\s*:.*\"name\"", re.S)),
    ("```json fence", re.compile(r"```\s*json", re.I)),
    ("template token", re.compile(r"<\|im_(start|end)\|>|<\|endoftext\|>|<function")),
    ("tool name", re.compile(r"\bresos__\w+")),
]


def prose(answer: str) -> str:
    """The answer without code blocks and JSON objects: a count echoed inside a tool's
    raw result is not an answer."""
    text = re.sub(r"```.*?(```|$)", " ", answer, flags=re.S)
    previous = None
    while previous != text:
        previous, text = text, re.sub(r"\{[^{}]*\}", " ", text)
    return text


def leaks_in(answer: str) -> list[str]:
    return [name for name, pattern in LEAKS if pattern.search(answer)]
