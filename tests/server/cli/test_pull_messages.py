"""Issue 25, item 7, against the session's real Label Studio through the CLI: a pull names an
annotation it cannot store by its Label Studio task id ("task 123:", not "line 4:"), a pull
that finds nothing new reports the same skipped count as the full pull before it, and a
disagreement campaign that fell back to random is labelled so in list and status."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from annotation.labelstudio.client import LabelStudioClient
from annotation.labelstudio.service import LabelStudioService
from tests.server.cli.test_campaign_cli import (  # noqa: F401 (fixtures)
    _target,
    config,
    labelstudio,
    run,
)
from tests.support.factories import FAIRJUDGE


def test_pull_messages_and_the_fallback_label(
    config: tuple[Path, int, int],  # noqa: F811
    labelstudio: LabelStudioService,  # noqa: F811
) -> None:
    path, _, judge_run = config
    created = run(
        path, "campaign", "create", "--judge-run", str(judge_run), "--size", "3",
        "--annotators", "1", "--seed", "1", "--name", "messages", "--json",
    )  # fmt: skip
    assert created.exit_code == 0, created.output
    project = json.loads(created.stdout)["project"]
    admin = LabelStudioClient(labelstudio.url, labelstudio.connection().token)
    first, second, third = sorted(t["id"] for t in admin.export_tasks(project))
    target = _target(admin, project)
    score = {"from_name": "score_ICS", "to_name": target, "type": "choices"}
    admin.annotate(first, [{**score, "value": {"choices": ["3"]}}])
    admin._sdk.annotations.create(second, result=[], was_cancelled=True)  # a skip

    # By hand: one rating stored, one annotation skipped; the second pull finds nothing new
    # and must say the same 1 skipped (issue 25: it said 0).
    full = json.loads(run(path, "campaign", "pull", "messages", "--json").stdout)
    assert (full["added"], full["skipped"]) == (1, 1)
    empty = json.loads(run(path, "campaign", "pull", "messages", "--json").stdout)
    assert (empty["added"], empty["unchanged"], empty["skipped"]) == (0, 1, 1)
    plain = run(path, "campaign", "pull", "messages")
    assert "1 unchanged, 0 withdrawn, 1 skipped" in plain.output

    # An annotation with a rationale but no score cannot be stored; the message names its
    # task as Label Studio shows it (the id read from the export above).
    why = {"from_name": "rationale_ICS", "to_name": target, "type": "textarea"}
    admin.annotate(third, [{**why, "value": {"text": ["fine"]}}])
    done = subprocess.run(
        [*FAIRJUDGE, "--config", str(path), "campaign", "pull", "messages"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    said = f"  task {third}: admin@fairjudge.local: rationale given without a score for ICS"
    assert said in done.stderr
    assert "line " not in done.stderr

    # The fixture's judge drew one sample per item: disagreement sampling falls back to a
    # simple random sample, and the campaign says so wherever its design is shown.
    args = ("campaign", "create", "--judge-run", str(judge_run), "--size", "3")
    args += ("--strategy", "disagreement", "--name", "fell-back", "--json")
    made = run(path, *args)
    assert made.exit_code == 0, made.output
    label = "random (fell back from disagreement: the judge drew one sample per item"
    assert json.loads(made.stdout)["strategy"].startswith(label)
    listed = {c["name"]: c for c in json.loads(run(path, "campaign", "list", "--json").stdout)}
    assert listed["fell-back"]["strategy"].startswith(label)
    assert listed["messages"]["strategy"] == "random"
    status = json.loads(run(path, "campaign", "status", "fell-back", "--json").stdout)
    assert status["strategy"].startswith(label)
    # The same request again is the same campaign (stored as random, asked as disagreement).
    again = run(path, *args)
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["created"] is False
