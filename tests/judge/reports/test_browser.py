"""The item browser: every judged item with its texts, answers and judgments, escaped, in a
self-contained page, and the same content under "items" in report.json."""

from __future__ import annotations

import json
import re
from pathlib import Path

from judge.reports.browser import item_browser
from judge.reports.render import write_report
from judge.store.engine import session_scope
from server import usecases
from tests.judge.reports.conftest import HOSTILE, HOSTILE_EXPLANATION, JudgedRun


def written(run: JudgedRun, out: Path) -> tuple[str, dict[str, object]]:
    with session_scope(run.engine) as session:
        report = usecases.full_report(session, run.judge_run_id)
    paths = write_report(report, out)
    return paths["html"].read_text(encoding="utf-8"), json.loads(paths["json"].read_text())


def test_untrusted_text_is_escaped_in_report_html(small_run: JudgedRun, tmp_path: Path) -> None:
    html, _ = written(small_run, tmp_path)
    # The stub echoes the question into the answer: both must appear escaped, never as markup.
    assert HOSTILE not in html
    assert "Answer: Is &lt;script&gt;alert(1)&lt;/script&gt; fine?" in html
    assert "Is &lt;script&gt;alert(1)&lt;/script&gt; fine?" in html
    assert HOSTILE_EXPLANATION not in html
    assert "&lt;img src=x onerror=&#34;alert(2)&#34;&gt;" in html
    # The only script is the browser's own filter script.
    assert len(re.findall(r"<script\b", html)) == 1


def test_browser_shows_every_judgment_with_flags_and_raw_output(
    small_run: JudgedRun, tmp_path: Path
) -> None:
    html, data = written(small_run, tmp_path)
    items = data["items"]
    assert isinstance(items, list)
    # 6 items: S1, S2, S3, S4 and the two S1 copies; S2 has TCS, PCS and ETCS.
    assert len(items) == 6 and html.count('<article class="item"') == 6
    by_key = {i["key"]: i for i in items}
    assert [
        j["rubric"] for j in by_key[next(k for k in by_key if k.startswith("s2-"))]["judgments"]
    ] == ["ETCS", "PCS", "TCS"]
    prose = by_key["prose"]
    (judgment,) = prose["judgments"]
    assert judgment["score"] is None and judgment["unscored_kind"] == "unparsable"
    assert judgment["raw_output"] == "I think the answer is quite fair overall."
    assert prose["flags"] == ["ICS repaired", "ICS unscored"]
    assert "unscored: unparsable" in html and "I think the answer is quite fair overall." in html
    s2 = next(i for i in items if i["stage"] == "S2")
    assert s2["flags"] == ["answer B cut off (finish_reason=length)"]
    assert [a["part"] for a in s2["answers"]] == ["A", "B"]
    assert set(s2["texts"]) >= {"story_a", "story_b", "changed_factor"}
    # Filterable: each item carries its stage, factor and flag kinds; each judgment its rubric
    # and score; raw replies are folded.
    assert 'data-stage="S2"' in html and 'data-flags="flagged cut_off"' in html
    assert 'data-flags="flagged repaired unscored"' in html
    assert 'data-rubric="ICS" data-score="unscored"' in html
    assert html.count("<summary>raw output") == sum(len(i["judgments"]) for i in items)
    for name in ("stage", "factor", "rubric", "score", "flag"):
        assert f'<select name="{name}">' in html
    assert "<option>unscored</option>" in html


def test_report_stays_self_contained(small_run: JudgedRun, tmp_path: Path) -> None:
    html, _ = written(small_run, tmp_path)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "<link" not in html and "@import" not in html


def test_browser_combines_samples_like_the_metrics(small_run: JudgedRun) -> None:
    with session_scope(small_run.engine) as session:
        browser = item_browser(session, small_run.judge_run_id)
    for item in browser.items:
        for rubric, combined in item.combined.items():
            scores = [j.score for j in item.judgments if j.rubric == rubric]
            # One sample per judgment: the combined score is that sample's score.
            assert combined == (None if scores == [None] else scores[0])


def test_report_json_keeps_its_keys_and_adds_items(judged_sample: JudgedRun) -> None:
    with session_scope(judged_sample.engine) as session:
        data = usecases.full_report(session, judged_sample.judge_run_id).to_json()
    # The keys report.json had before the browser, unchanged; "items" is new.
    before = {
        "dataset",
        "generation_run",
        "judge_run",
        "metrics_overall",
        "metrics_by_factor",
        "metric_definitions",
        "answers",
        "unscored",
        "n_item_scores",
        "n_unscored_items",
        "tokens",
        "item_scores",
    }
    assert before <= set(data) and "items" in data
    assert len(data["items"]) == 72  # every item of the sample was judged
