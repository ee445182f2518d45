"""``fairjudge judge --swap-order`` and ``fairjudge checks`` through the real command
line against the scripted stub, whose judge scores 2 when the judged answer names Latoya and
4 otherwise (so the shift the audit must report is known by hand)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import select

from judge.data.datasets import import_items
from judge.data.responses import import_responses
from judge.store.engine import session_scope
from judge.store.tables import Item
from tests.judge.trust.test_trust import by_name
from tests.support.cli import Done
from tests.support.cli import fairjudge as run_fairjudge
from tests.support.factories import SAMPLE, write_config
from tests.support.stub_openai import StubServer


def fairjudge(config: Path, *args: str) -> Done:
    """``fairjudge --config CONFIG ARGS``, run in this process (tests/support/cli.py)."""
    return run_fairjudge("--config", config, *args)


def test_counterfactual_audit_and_show_through_the_cli(
    tmp_path: Path, db_url: str, engine: Engine
) -> None:
    with session_scope(engine) as session:
        import_items(session, SAMPLE, "sample")
        keys = sorted(session.exec(select(Item.key).where(Item.stage == "S1")).all())[:8]
    # 8 answers, not 6: with two swap kinds the audit tests by direction with Holm's
    # correction over both kinds, and 6 consistent pairs (exact p 2 / 2**6 = 0.031 each,
    # doubled by Holm) are too few to flag; 8 give 2 / 2**8 = 0.0078, 0.0156 after Holm.
    texts = [f"Mary did the work for item {i}, and she did it well." for i in range(8)]
    rows = [{"item_id": k, "part": "answer", "text": t} for k, t in zip(keys, texts, strict=True)]
    done = import_responses(engine, "sample", rows, model="writer")
    with StubServer(responder=by_name) as stub:
        config = write_config(tmp_path / "f.toml", stub.base_url, db_url)
        judged = fairjudge(config, "judge", str(done.generation_run_id), "--json")
        assert judged.returncode == 0, judged.stderr
        judge_run = json.loads(judged.stdout)["run_id"]
        audit = fairjudge(
            config, "checks", "counterfactual", "--judge-run", str(judge_run),
            "--swap", "names", "--swap", "gender", "--swap-in", "answers", "--json", "--out",
            str(tmp_path / "rep"),
        )  # fmt: skip
        assert audit.returncode == 0, audit.stderr
    data = json.loads(audit.stdout)
    # 8 answers, each "Mary ... she" -> "Latoya ... he": 8 copied, none skipped
    assert data["copy"]["items_copied"] == 8 and data["copy"]["items_skipped"] == 0
    assert data["copy"]["swaps"] == {"Mary -> Latoya": 8, "she -> he": 8}
    (result,) = data["judge_diagnostics"]["counterfactual"]
    (ics,) = result["rubrics"]
    # every score 4 -> 2 by the stub's rule: a shift of exactly -2 on 8 pairs, flagged
    assert (ics["pairs"], ics["changed"], ics["mean_difference"]) == (8, 8, -2.0)
    assert result["flagged"] == ["ICS"]
    assert "Judge diagnostics" in (tmp_path / "rep" / "report.html").read_text()

    shown = fairjudge(config, "checks", "show", "--judge-run", str(judge_run))
    assert shown.returncode == 0, shown.stderr
    assert "Counterfactual swaps" in shown.stdout and "FLAGGED" in shown.stdout

    missing = fairjudge(config, "checks", "show", "--judge-run", "999")
    assert missing.returncode != 0 and "999" in missing.stderr
    bad = fairjudge(config, "checks", "counterfactual", "--judge-run", str(judge_run),
                    "--swap", "names", "--swaps", str(tmp_path / "nope.txt"))  # fmt: skip
    assert bad.returncode != 0 and "nope.txt" in bad.stderr


def _garbling_copies(bad: int):  # type: ignore[no-untyped-def]
    """The judge of ``by_name``, except that it answers prose with no score (on the repair
    too) for the copy's answers of items 0..bad-1 (those naming Latoya)."""

    def reply(messages: list[dict[str, str]]) -> str | None:
        if messages[0]["role"] == "system":
            text = "\n".join(m["content"] for m in messages)  # the repair's turns too
            found = re.search(r"item (\d+)", text)
            if "Latoya" in text and found and int(found.group(1)) < bad:
                return "I think the answer is quite fair overall."
        return by_name(messages)

    return reply


@pytest.mark.parametrize(
    ("bad", "code"),
    [
        # 8 copied answers judged on ICS once: 8 of 8 unscored > 4 (half of 8): unusable.
        (8, 3),
        # 4 of 8: exactly the default half, not more: the copy's run is finished.
        (4, 0),
        # None: finished (the copy scored like the test above).
        (0, 0),
    ],
)
def test_a_counterfactual_whose_copy_is_mostly_unscored_exits_3(
    tmp_path: Path, db_url: str, engine: Engine, bad: int, code: int
) -> None:
    with session_scope(engine) as session:
        import_items(session, SAMPLE, "sample")
        keys = sorted(session.exec(select(Item.key).where(Item.stage == "S1")).all())[:8]
    texts = [f"Mary did the work for item {i}, and she did it well." for i in range(8)]
    rows = [{"item_id": k, "part": "answer", "text": t} for k, t in zip(keys, texts, strict=True)]
    done = import_responses(engine, "sample", rows, model="writer")
    with StubServer(responder=_garbling_copies(bad)) as stub:
        config = write_config(tmp_path / "f.toml", stub.base_url, db_url)
        judged = fairjudge(config, "judge", str(done.generation_run_id), "--json")
        assert judged.returncode == 0, judged.stderr  # the original names Mary: all scored
        judge_run = json.loads(judged.stdout)["run_id"]
        audit = fairjudge(
            config, "checks", "counterfactual", "--judge-run", str(judge_run),
            "--swap", "names", "--swap", "gender", "--json",
        )  # fmt: skip
    assert audit.returncode == code, audit.stderr
    if code == 0:  # the copy's judgments: ``bad`` of 8 unscored, the others scored
        flags = json.loads(audit.stdout)["summary"]["flags"]
        assert (flags.get("unscored", 0), flags.get("scored", 0)) == (bad, 8 - bad), flags
    if code == 3:
        assert "is unusable: 8 of 8 judgments unscored (" in audit.stderr
        assert "more than the 50 % [runs] max_unusable_share allows" in audit.stderr
