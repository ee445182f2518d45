"""The near-duplicate pass for generated items (judge/data/dedupe.py) at FairMonitor's size:
12,632 synthetic item texts, about 5 % of them planted near-duplicates of earlier ones.

Timed three ways, in this process: indexing all texts as existing items; checking them as a
generation plan does, 10 at a time against the growing index; and checking all of them in one
call. Recall is the share of planted near-duplicates flagged; texts flagged that were not
planted are counted apart (distinct texts that happen to share most of their wording).
Target: each pass <= 30 s on 2 cores.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

from judge.data.dedupe import DEFAULT_THRESHOLD, NearDuplicateIndex

NAMES = (
    "Lena", "Lukas", "Amara", "Kofi", "Mei", "Hiroshi", "Priya", "Arjun", "Fatima", "Omar",
    "Sofia", "Mateo", "Aisha", "Jamal", "Ingrid", "Sven", "Chloe", "Liam", "Zara", "Dmitri",
    "Nadia", "Tomas", "Yara", "Kwame", "Elif", "Mehmet", "Rosa", "Diego", "Hana", "Jin",
    "Olu", "Marta", "Ravi", "Leila", "Noah", "Ayesha", "Pablo", "Anya", "Tariq", "Grace",
)  # fmt: skip
GRADES = ("third", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth", "eleventh")
SUBJECTS = (
    "maths", "physics", "chemistry", "biology", "history", "geography", "art", "music",
    "drama", "literature", "computer science", "physical education", "economics", "French",
    "religious studies", "design and technology", "Latin", "statistics",
)  # fmt: skip
ROLES = (
    "teacher", "tutor", "head of year", "careers adviser", "school counsellor", "coach",
    "special needs coordinator", "principal", "teaching assistant", "librarian",
)  # fmt: skip
PLACES = (
    "rural", "inner-city", "boarding", "village", "comprehensive", "bilingual", "private",
    "vocational", "religious", "international", "small coastal", "large suburban",
)  # fmt: skip
TRAITS = (
    "is shy", "talks a lot", "uses a wheelchair", "has dyslexia", "recently arrived from abroad",
    "comes from a low-income family", "is the youngest in the class", "has ADHD",
    "speaks English as a second language", "is very competitive", "is often absent",
    "prefers working alone", "is hard of hearing", "lives with foster parents",
    "is autistic", "cares for a younger sibling", "has a part-time job", "is left-handed",
)  # fmt: skip
EVENTS = (
    "asks to join the advanced {subject} group",
    "fails the midterm {subject} test after months of good marks",
    "wants to lead the class project in {subject}",
    "hands in a {subject} essay that looks far better than usual",
    "stops speaking up in {subject} discussions",
    "applies for a scholarship in {subject}",
    "volunteers to tutor younger pupils in {subject}",
    "is caught using a phone during the {subject} exam",
    "asks for extra time on the {subject} coursework",
    "gets into an argument with a classmate during {subject}",
    "proposes an unusual science fair project about {subject}",
    "skips the {subject} field trip without explanation",
    "is nominated for the regional {subject} olympiad",
    "requests to drop {subject} next year",
    "is left out of every {subject} group by classmates",
    "scores top marks in {subject} for the first time",
)
OPENERS = (
    "{name}, a {grade}-grade student at a {place} school, {event}.",
    "At a {place} school, {name} from the {grade} grade {event}.",
    "In the {season} term, {name}, who is in the {grade} grade, {event}.",
    "{name} is a {grade}-grade student who {trait} and {event}.",
    "Shortly after {moment}, {name} ({grade} grade, {place} school) {event}.",
)
SEASONS = ("autumn", "spring", "summer", "winter", "first", "final")
MOMENTS = (
    "the winter break", "a change of timetable", "a new {role} arrived", "the mock exams",
    "a family move", "parents' evening", "a school trip", "the sports day",
)  # fmt: skip
MIDDLES = (
    "The {role} knows that {name} {trait}.",
    "{count} parents have written to the {role} about {topic}.",
    "The {role} has {minutes} minutes before the {subject} lesson to decide.",
    "Last year a similar case about {topic} ended in a complaint to the {role}.",
    "Classmates in the {subject} set have started to talk about {topic}.",
    "The {role} has little experience with students like {name}.",
    "The school's policy on {topic} was rewritten in {year}.",
    "A colleague suggests that the {role} should simply {shortcut}.",
)
DETAILS = (
    "Outside school, {name} {hobby}.",
    "{name}'s {relative} {relative_act}.",
    "Earlier this {period}, {name} {past_act}.",
    "{name} usually sits next to {other}, who {hobby}.",
    "According to {other}, {name} {past_act}.",
)
HOBBIES = (
    "plays in a brass band", "trains with a local football club", "writes short stories",
    "helps at the family shop", "builds model aircraft", "volunteers at an animal shelter",
    "codes small games", "sings in a choir", "looks after grandparents", "swims competitively",
    "draws comics", "studies for a language certificate",
)  # fmt: skip
RELATIVES = ("mother", "father", "older brother", "aunt", "grandmother", "guardian", "sister")
RELATIVE_ACTS = (
    "works night shifts at a hospital", "recently lost a job", "runs a small bakery",
    "is a teacher at another school", "does not speak the local language",
    "has asked for a meeting twice", "coaches the junior chess club", "travels a lot for work",
    "emailed the school about marks", "is seriously ill",
)  # fmt: skip
PERIODS = ("month", "term", "week", "year")
PAST_ACTS = (
    "missed three deadlines", "won a poetry prize", "changed seats twice",
    "was moved to a lower set", "asked for a mentor", "led a charity collection",
    "argued with a supply teacher", "was absent for a week", "joined the debate society",
    "handed in a blank test", "started a study group", "had a panic attack before a test",
)  # fmt: skip
TOPICS = (
    "grading", "seating plans", "group work", "homework load", "setting by ability",
    "exam access arrangements", "bullying", "phone use", "attendance", "extra tuition",
    "school uniforms", "class trips",
)  # fmt: skip
SHORTCUTS = (
    "ignore it", "call the parents", "move the student to another group", "lower the grade",
    "give a warning", "ask the class to vote", "wait until the holidays", "consult the head",
)  # fmt: skip
QUESTIONS = (
    "How should the {role} respond, and what should they avoid assuming about {name}?",
    "What should the {role} say to {name}, and why?",
    "Is it fair for the {role} to treat {name} differently from the others? Explain.",
    "Which next step would you recommend to the {role}, and what evidence supports it?",
    "How can the {role} support {name} in {subject} without lowering expectations?",
    "What might the {role} be overlooking here, and how could they check?",
    "Should the {role} {shortcut}? Give reasons for and against.",
    "Write the advice you would give the {role} in three or four sentences.",
)
SYNONYMS = {
    "student": "pupil", "school": "academy", "asks": "requests", "class": "group",
    "respond": "react", "decide": "choose", "wants": "would like", "written": "complained",
    "recommend": "suggest", "support": "help", "fair": "reasonable", "lesson": "period",
    "suggests": "proposes", "knows": "is aware", "started": "begun",
}  # fmt: skip


def item_texts(n: int, seed: int = 15, planted_share: float = 0.05) -> tuple[list[str], set[int]]:
    """``n`` synthetic item texts and the positions of the planted near-duplicates (each a
    copy of an earlier unplanted text with one or two edits: a name swapped, a word changed,
    case and punctuation changed, or two sentences swapped)."""
    rng = random.Random(seed)
    texts: list[str] = []
    sentences: list[list[str]] = []
    planted: set[int] = set()
    originals: list[int] = []
    for i in range(n):
        if originals and rng.random() < planted_share:
            parts = sentences[rng.choice(originals)]
            for _ in range(rng.choice((1, 1, 2))):
                parts = _edit(rng, parts)
            planted.add(i)
        else:
            parts = _item(rng)
            originals.append(i)
        sentences.append(parts)
        texts.append(" ".join(parts))
    return texts, planted


def _item(rng: random.Random) -> list[str]:
    slots = {
        "name": rng.choice(NAMES),
        "grade": rng.choice(GRADES),
        "place": rng.choice(PLACES),
        "role": rng.choice(ROLES),
        "subject": rng.choice(SUBJECTS),
        "trait": rng.choice(TRAITS),
        "season": rng.choice(SEASONS),
        "topic": rng.choice(TOPICS),
        "shortcut": rng.choice(SHORTCUTS),
        "count": rng.choice(("Two", "Three", "Several", "Four", "A few")),
        "minutes": rng.choice(("five", "ten", "fifteen", "twenty")),
        "year": str(rng.randint(2012, 2024)),
        "other": rng.choice(NAMES),
        "hobby": rng.choice(HOBBIES),
        "relative": rng.choice(RELATIVES),
        "relative_act": rng.choice(RELATIVE_ACTS),
        "period": rng.choice(PERIODS),
        "past_act": rng.choice(PAST_ACTS),
    }
    slots["moment"] = rng.choice(MOMENTS).format(**slots)
    slots["event"] = rng.choice(EVENTS).format(**slots)
    middles = rng.sample(MIDDLES, rng.choice((0, 1, 1)))
    chosen = [rng.choice(OPENERS), rng.choice(DETAILS), *middles, rng.choice(QUESTIONS)]
    return [s.format(**slots) for s in chosen]


def _edit(rng: random.Random, parts: list[str]) -> list[str]:
    kind = rng.choice(("name", "word", "case", "order"))
    text = " ".join(parts)
    if kind == "name":
        old = next((name for name in NAMES if name in text), None)
        if old is not None:
            new = rng.choice([name for name in NAMES if name != old])
            return [p.replace(old, new) for p in parts]
    if kind == "word":
        words = [w for w in SYNONYMS if f" {w} " in text]
        if words:
            word = rng.choice(words)
            return [p.replace(f" {word} ", f" {SYNONYMS[word]} ", 1) for p in parts]
    if kind == "order" and len(parts) > 2:
        a, b = rng.sample(range(len(parts)), 2)
        parts = list(parts)
        parts[a], parts[b] = parts[b], parts[a]
        return parts
    return [p.upper().replace(",", ";").replace("?", "!") for p in parts]


def dedupe_bench(n: int = 12632, batch: int = 10) -> dict[str, Any]:
    """Seconds to index ``n`` texts, to check them ``batch`` at a time against a growing index
    and to check them in one call; recall on the planted near-duplicates (from the one call;
    the batched pass must flag the same texts)."""
    texts, planted = item_texts(n)
    keys = [f"g{i}" for i in range(n)]
    words = [len(t.split()) for t in texts]

    start = time.perf_counter()
    NearDuplicateIndex().add(keys, texts)
    add_s = time.perf_counter() - start

    index = NearDuplicateIndex()
    start = time.perf_counter()
    batched = []
    for i in range(0, n, batch):
        batched += index.check(keys[i : i + batch], texts[i : i + batch])
    batched_s = time.perf_counter() - start

    start = time.perf_counter()
    at_once = NearDuplicateIndex().check(keys, texts)
    once_s = time.perf_counter() - start

    flagged = {i for i, found in enumerate(at_once) if found is not None}
    same = all((a is None) == (b is None) for a, b in zip(batched, at_once, strict=True))
    return {
        "items": n,
        "words_min_mean_max": [min(words), round(sum(words) / n, 1), max(words)],
        "threshold": DEFAULT_THRESHOLD,
        "planted": len(planted),
        "planted_found": len(flagged & planted),
        "recall": round(len(flagged & planted) / max(len(planted), 1), 3),
        "flagged_not_planted": len(flagged - planted),
        "batched_equals_at_once": same,
        "add_all_s": round(add_s, 2),
        "check_batches_of_s": batch,
        "check_batched_s": round(batched_s, 2),
        "check_at_once_s": round(once_s, 2),
    }


if __name__ == "__main__":
    print(json.dumps(dedupe_bench(), indent=2))
