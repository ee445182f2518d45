"""Counterfactual swaps, worked out by hand on small texts: names, pronouns, case forms,
possessives, and words inside other words left alone; bad swap lists refused line by line."""

from __future__ import annotations

from pathlib import Path

import pytest

from judge.errors import InvalidInputError
from judge.trust.swaps import Swap, load_swaps, swap_text

GENDER = (Swap("gender", "he", "she"), Swap("gender", "his", "her"), Swap("gender", "boy", "girl"))
NAMES = (Swap("names", "Mary", "Latoya"),)


def test_both_directions_in_one_pass() -> None:
    done = swap_text("He gave her book to his sister; she thanked him.", GENDER)
    # he->she, her->his, his->her, she->he; "sister" and "him" are not in this list.
    assert done.text == "She gave his book to her sister; he thanked him."
    assert {(c.before, c.after, c.count) for c in done.changes} == {
        ("He", "She", 1), ("her", "his", 1), ("his", "her", 1), ("she", "he", 1)
    }  # fmt: skip


def test_case_forms_and_possessives() -> None:
    text = "HE said Mary's essay beat the BOY's. Boys? No: boy."
    done = swap_text(text, GENDER + NAMES)
    assert done.text == "SHE said Latoya's essay beat the GIRL's. Boys? No: girl."


def test_words_inside_other_words_are_untouched() -> None:
    text = "The shepherd in Maryland chose the other theme; hello, Marymount."
    done = swap_text(text, GENDER + NAMES)
    assert done.text == text and not done.changed


def test_a_name_written_with_capitals_matches_only_as_written_or_uppercase() -> None:
    done = swap_text("mary, Mary, MARY", NAMES)
    assert done.text == "mary, Latoya, LATOYA"


def test_everything_else_stays_byte_for_byte() -> None:
    text = "  He\tsaid:\n«his» — café, 12 boys…\r\n"
    done = swap_text(text, GENDER)
    assert done.text == "  She\tsaid:\n«her» — café, 12 boys…\r\n"


def test_the_bundled_list_loads_and_selects_by_kind() -> None:
    swaps = load_swaps()
    assert swaps.kinds == ("gender", "names", "race")
    # 5 award pairs (seed 000) + 10 name-audit pairs and the surnames (seed 002).
    assert len(swaps.select(["names"])) == 16
    with pytest.raises(InvalidInputError, match="no swaps of kind 'religion'"):
        swaps.select(["religion"])


def test_a_bad_list_names_every_line_to_fix(tmp_path: Path) -> None:
    path = tmp_path / "swaps.txt"
    path.write_text(
        "# comment\n"
        "gender he she\n"
        "gender his\n"  # line 3: two fields
        "gender she her\n"  # line 4: 'she' already on line 2
        "names Mary Mary\n"  # line 5: paired with itself
        "names Anne Marie Claire\n"  # line 6: four fields
        "names Jo 42\n"  # line 7: not a word
    )
    with pytest.raises(InvalidInputError) as caught:
        load_swaps(path)
    assert [line for line, _ in caught.value.problems] == [3, 4, 5, 6, 7]
    assert "line 2" in caught.value.problems[1][1]


def test_direction_of_a_copy_is_the_net_words_moved_toward_side_b() -> None:
    from judge.trust.swaps import net_toward_b, sides

    done = swap_text("He gave her book to his sister; she thanked him.", GENDER)
    # By hand: He->She (toward B, +1), her->his (toward A, -1), his->her (+1), she->he (-1):
    # net 0, a mixed pair.
    assert net_toward_b([(c.before, c.after, c.count) for c in done.changes], GENDER, "gender") == 0
    done = swap_text("HE and his boy.", GENDER)
    # HE->SHE, his->her, boy->girl: 3 words toward side B (female)
    assert net_toward_b([(c.before, c.after, c.count) for c in done.changes], GENDER, "gender") == 3
    # names only: no gendered word moved, so no direction for gender
    assert net_toward_b([("Mary", "Latoya", 1)], GENDER + NAMES, "gender") is None
    assert net_toward_b([("Mary", "Latoya", 2)], GENDER + NAMES, "names") == 2
    # the bundled list's columns: male / female, Black- / White-associated names
    assert sides("gender", load_swaps().select(["gender"])) == ("male", "female")
    assert sides("names", load_swaps().select(["names"])) == (
        "Black-associated names",
        "White-associated names",
    )
    # a list of one's own with the columns the other way round gets the names reversed
    assert sides("gender", [Swap("gender", "she", "he")]) == ("female", "male")
    assert sides("names", NAMES) == ("White-associated names", "Black-associated names")
    # a first pair the bundled list does not start with: named after its words
    assert sides("names", [Swap("names", "Ann", "Aisha")]) == ("'Ann' side", "'Aisha' side")
