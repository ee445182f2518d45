"""``fairjudge audit SUITE run``, ``runs``, ``show`` and the award follow-up commands through
the real command line, against the scripted stub (answers of a known distribution, failures
on demand) and, for every suite, against the real embedded model."""

from __future__ import annotations

import csv
import json
import re
import threading
from pathlib import Path

import pytest
from scipy import stats
from sqlalchemy.engine import Engine
from sqlmodel import Session

from judge.audits.award_data import load_name_groups
from judge.audits.base import STATUSES
from judge.audits.runner import stored_answers
from judge.models.embedded import EmbeddedServer
from server.usecases import audits
from tests.judge.audits.test_runner import always_group_a
from tests.support.cli import Done
from tests.support.cli import fairjudge as run_fairjudge
from tests.support.factories import make_settings, write_config
from tests.support.stub_openai import StubServer

GROUPS = load_name_groups()


def responder(messages: list[dict[str, str]]) -> str | int | None:
    """The model under test always names the group-A student; the judge calls every
    explanation justified."""
    if messages[0]["role"] == "system":
        return json.dumps({"explanation": "cites the answers", "class": "justified"})
    return always_group_a(messages)


def fairjudge(config: Path, *args: str) -> Done:
    """``fairjudge --config CONFIG audit ARGS``, run in this process (tests/support/cli.py)."""
    return run_fairjudge("--config", config, "audit", *args)


def test_award_run_show_and_followups_through_the_cli(tmp_path: Path, db_url: str) -> None:
    with StubServer(responder=responder) as stub:
        config = write_config(tmp_path / "f.toml", stub.base_url, db_url, concurrency=4)
        args = ("award", "run", "--levels", "5,10", "--pairs", "3", "--followup")
        done = fairjudge(config, *args, "--json", "--out", str(tmp_path / "rep"))
        assert done.returncode == 0, done.stderr
        data = json.loads(done.stdout)
        run_id = data["run"]["id"]
        # 2 levels x 3 pairs x 4 variants = 24 prompts, all answered A, each followed up.
        assert data["answers"] == {"main": {"parsed": 24}, "followup": {"answered": 24}}
        overall = data["analysis"]["overall"]
        assert overall["group_a"] == 24
        assert overall["binomial"]["p_value"] == pytest.approx(stats.binomtest(24, 24).pvalue)
        html = (tmp_path / "rep" / "report.html").read_text()
        assert "Answers by status" in html and "Choices per performance level" in html

        sent = stub.state.requests
        again = json.loads(fairjudge(config, *args, "--json").stdout)
        assert again["run"]["id"] == run_id and stub.state.requests == sent  # nothing resent

        listed = json.loads(fairjudge(config, "runs", "--json").stdout)
        assert [(r["id"], r["suite"], r["answers"]) for r in listed] == [(run_id, "award", 48)]

        classified = fairjudge(config, "award", "classify", str(run_id), "--json")
        assert classified.returncode == 0, classified.stderr
        assert json.loads(classified.stdout)["classified"] == {"labelled": 24}

        exported = tmp_path / "followups.csv"
        done = fairjudge(config, "award", "export-followups", str(run_id), "--out", str(exported))
        assert done.returncode == 0, done.stderr
        with exported.open(newline="") as handle:
            rows = list(csv.DictReader(handle))
        assert len(rows) == 24
        for n, row in enumerate(rows):  # a person disagrees with the judge on every 4th
            row["label"] = "indecisive" if n % 4 == 0 else "justified"
        with exported.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        done = fairjudge(
            config, "award", "import-labels", str(run_id), str(exported), "--annotator", "ann"
        )
        assert done.returncode == 0, done.stderr
        assert "24 added" in done.stdout

        shown = json.loads(fairjudge(config, "show", str(run_id), "--json").stdout)
    classes = shown["followup"]["classes"]
    assert classes["human:ann"] == {"labelled": 24}
    # The judge said 'justified' every time: its labels are constant, so kappa with the
    # person is 0 by definition (observed agreement equals chance agreement: 18/24 both ways).
    (pair,) = shown["followup"]["agreement"]["pairwise_kappa"]
    assert pair["n"] == 24 and pair["kappa"]["value"] == pytest.approx(0.0)
    human = shown["followup"]["tests"]["human:ann"]["overall"]
    assert human["counts_a"] == [6, 18, 0] and human["counts_b"] == [0, 0, 0]


def test_failed_calls_exit_3_unless_allowed(tmp_path: Path, db_url: str) -> None:
    with StubServer(responder=lambda m: 500) as stub:
        config = write_config(tmp_path / "f.toml", stub.base_url, db_url)
        args = ("award", "run", "--levels", "5", "--pairs", "1")
        done = fairjudge(config, *args)
        assert done.returncode == 3
        # Every call failed: 4 of 4 answers unreadable, more than the default half, so the run
        # is unusable (it was "incomplete" before audits had the unusable check).
        assert "audit run 1 is unusable: 4 of 4 answers unreadable (error: 4)" in done.stderr
        assert "retry the 4 failed calls" in done.stderr
        allowed = fairjudge(config, *args, "--allow-failures", "--json")
    assert allowed.returncode == 0
    data = json.loads(allowed.stdout)
    assert data["answers"] == {"main": {"error": 4}}
    assert data["analysis"] is None and "no readable answer" in data["analysis_error"]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("award", "run", "--levels", "5,x"), 2, "whole numbers separated by commas"),
        (("award", "run", "--levels", "25"), 1, "levels must be integers between 0 and 20"),
        (("award", "run", "--items", "nowhere.json"), 1, "does not exist"),
        (("names", "run", "--repeats", "0"), 2, "0 is not in the range x>=1"),
        (("show", "99"), 1, "no audit run 99"),
        (("award", "classify", "99"), 1, "no audit run 99"),
    ],
)
def test_bad_input_says_what_to_fix(
    tmp_path: Path, db_url: str, args: tuple[str, ...], code: int, message: str
) -> None:
    config = write_config(tmp_path / "f.toml", "http://127.0.0.1:9/v1", db_url)
    done = fairjudge(config, *args)
    assert done.returncode == code, done.stderr
    assert message in done.stderr


@pytest.mark.embedded
def test_every_suite_on_the_real_model(
    tmp_path: Path, engine: Engine, db_url: str, embedded: EmbeddedServer
) -> None:
    """A few prompts of each suite on SmolLM2-135M: whatever it says is stored verbatim with
    a status, and each reading agrees with an independent check of the raw text."""
    settings = make_settings(
        embedded.base_url, db_url, model=embedded.config.model_alias, concurrency=1, timeout_s=120
    )
    award = audits.run_audit(
        engine, settings, "award", {"levels": [10], "pairs_per_level": 1, "followup": True},
        limit=2, max_tokens=24,
    )  # fmt: skip
    names = audits.run_audit(engine, settings, "names", {"repeats": 1}, limit=2, max_tokens=40)
    bbi = audits.run_audit(
        engine, settings, "bbi", {"per_type": 1, "repeats": 1}, limit=1, max_tokens=120
    )
    with Session(engine) as session:
        runs = {
            name: stored_answers(session, s.run_id)
            for name, s in (("award", award), ("names", names), ("bbi", bbi))
        }
        result = audits.audit_result(session, award.run_id)
    for name, answers in runs.items():
        main = [a for a in answers if a.turn == "main"]
        assert len(main) == (1 if name == "bbi" else 2), name
        for a in answers:
            assert a.status in STATUSES and a.status != "error", (name, a.status)
            assert a.raw_text is not None  # kept verbatim, even when unreadable
    for a in runs["award"]:
        if a.turn != "main" or a.status == "empty":
            continue
        text = a.raw_text or ""
        has_a = re.search(rf"\b{a.meta['name_a']}\b", text, re.I) is not None
        has_b = re.search(rf"\b{a.meta['name_b']}\b", text, re.I) is not None
        expected = "A" if has_a and not has_b else "B" if has_b and not has_a else "equivocal"
        assert a.value == expected, text
    followups = [a for a in runs["award"] if a.turn == "followup"]
    assert len(followups) == sum(a.value in ("A", "B") for a in runs["award"])
    for a in runs["names"]:
        if a.status == "parsed":
            assert re.search(r"\d", a.raw_text or ""), "a number was read from text with digits"
        else:
            assert a.value is None
    assert result.info["suite"] == "award" and result.report.sections[0].title == "Answers"
    # A rerun pays for nothing.
    again = audits.run_audit(engine, settings, "names", {"repeats": 1}, limit=2, max_tokens=40)
    assert again.main.tasks == 0


class Garbling:
    """The model under test answers the first ``bad`` names-audit prompts with text holding
    no number (unparsed) and every other with a plain amount (parsed)."""

    def __init__(self, bad: int) -> None:
        self.bad, self.lock = bad, threading.Lock()

    def __call__(self, messages: list[dict[str, str]]) -> str | int | None:
        with self.lock:
            self.bad -= 1
            if self.bad >= 0:
                return "Hmm, hard to say; it depends on many things."
        return "45000"


@pytest.mark.parametrize(
    ("bad", "share", "code", "status"),
    [
        # names run --repeats 1 --limit 4: 4 prompts, no second turn. 3 unreadable of 4:
        # 3 > 0.5 x 4 = 2.
        (3, 0.5, 3, "unusable"),
        # None unreadable: finished.
        (0, 0.5, 0, "finished"),
        # 2 of 4: exactly at the threshold 0.5 x 4 = 2, still finished.
        (2, 0.5, 0, "finished"),
        # The same 2 of 4 over a share of 0.25 (2 > 1).
        (2, 0.25, 3, "unusable"),
    ],
)
def test_an_audit_mostly_unreadable_ends_unusable_and_exits_3(
    tmp_path: Path, db_url: str, bad: int, share: float, code: int, status: str
) -> None:
    with StubServer(responder=Garbling(bad)) as stub:
        config = write_config(tmp_path / "f.toml", stub.base_url, db_url)
        config.write_text(config.read_text() + f"\n[runs]\nmax_unusable_share = {share!r}\n")
        done = fairjudge(config, "names", "run", "--repeats", "1", "--limit", "4", "--json")
    assert done.returncode == code, done.stderr
    if status == "unusable":
        assert f"audit run 1 is unusable: {bad} of 4 answers unreadable (unparsed: {bad})" in (
            done.stderr
        )
        assert f"more than the {share * 100:g} % [runs] max_unusable_share allows" in done.stderr
    else:
        data = json.loads(done.stdout)
        assert data["answers"]["main"].get("unparsed", 0) == bad, data["answers"]
        assert data["run"]["status"] == status, data["run"]
