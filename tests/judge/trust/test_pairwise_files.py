"""Reading pairwise judgments from text (``judge.trust.pairwise_files``): Shi et al.'s verdict
rule, read by hand off the authors' ``match_answer`` (the first ``[[X]]`` with X in A-D; C a
tie in their three-option mode; no mark: unreadable), and the plain format's verdicts."""

from __future__ import annotations

from judge.trust.pairwise_files import read_pairwise_text

HEADER = '"cmp_index"\t"A"\t"B"\t"task"\t"judge-x"\n'


def shi_row(key: str, reply: str, task: str = "coding") -> str:
    _, a, b = key.split(";")
    return "\t".join(f'"{v}"' for v in (key, a, b, task, reply)) + "\n"


def test_shi_verdicts_are_read_as_the_authors_read_them() -> None:
    replies = {
        "1;m;n": "Both fine, but [[C]]",  # tie
        "1;n;m": "I pick **[[B]]**\n\nas the better one",  # B, a reply over three lines
        "2;m;n": "no verdict given",  # unreadable
        "2;n;m": "[[D]] first, then [[A]]",  # the first mark is D: unreadable
    }
    text = HEADER + "".join(shi_row(k, v) for k, v in replies.items())
    read = read_pairwise_text(text, "shi2024", repetition=2)
    assert read.problems == []
    got = [(r.question, r.model_first, r.verdict, r.repetition, r.judge) for r in read.records]
    assert got == [
        ("1", "m", "tie", 2, "judge-x"),
        ("1", "n", "B", 2, "judge-x"),
        ("2", "m", "unreadable", 2, "judge-x"),
        ("2", "n", "unreadable", 2, "judge-x"),
    ]
    assert read.records[2].raw == "no verdict given"  # the reply is kept
    # where each record starts: the header is line 1, the B reply spans lines 3-5
    assert [r.line for r in read.records] == [2, 3, 6, 7]


def test_shi_rows_whose_models_disagree_with_cmp_index_are_problems() -> None:
    text = HEADER + '"1;m;n"\t"m"\t"other"\t"coding"\t"[[A]]"\n'
    read = read_pairwise_text(text, "shi2024")
    assert read.records == []
    assert read.problems == [(2, "columns A and B differ from cmp_index's models")]


def test_plain_verdicts_and_nul_characters() -> None:
    text = "question,model_a,model_b,verdict,judge\nq,x,y,TIE,j\nq,y,x,x,j\nq,x,y,C,j\n"
    read = read_pairwise_text(text, "csv")
    assert [r.verdict for r in read.records] == ["tie", "B"]  # a model's name: its position
    assert read.problems == [
        (4, "verdict 'C' is not A, B, tie, unreadable, or one of the pair's models ('x', 'y')")
    ]
    named = read_pairwise_text("question,model_a,model_b,verdict\nq,Tie,y,A\n", "csv", judge="j")
    assert named.problems == [
        (2, "a model may not be named 'Tie': A, B, tie and unreadable are verdicts")
    ]
    nul = read_pairwise_text("question,model_a,model_b,verdict\nq,x,y,A\x00\n", "csv", judge="j")
    assert nul.records == [] and nul.problems[0][0] == 2 and "NUL" in nul.problems[0][1]


def test_a_lone_surrogate_is_a_problem_not_a_crash() -> None:
    # JSON can carry "\\ud800" (half of a UTF-16 pair), which no store can keep as text
    text = "question,model_a,model_b,verdict\nq,x,y,A\nq\ud800,y,x,B\n"
    read = read_pairwise_text(text, "csv", judge="j")
    assert read.records == [] and read.problems == [
        (3, "holds a character that is not Unicode text")
    ]
