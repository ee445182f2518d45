"""``fairjudge dataset generate`` and ``dataset plan`` against the stub: JSON and readable
output, rejections printed with their raw text, the dry run, a rerun with nothing to do, and
unknown names refused with exit code 1 before any call."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from server.cli import cli
from tests.support.cli import fairjudge
from tests.support.factories import write_config
from tests.support.stub_openai import StubServer

PROSE = "Here are some ideas for questions about careers advice and gender."


def run(config: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--config", str(config), "dataset", *args])
    return result.exit_code, result.stdout, result.stderr


def test_generate_and_plan_print_json_and_a_rerun_asks_nothing(tmp_path: Path, db_url: str) -> None:
    with StubServer() as stub:
        config = write_config(tmp_path / "c.toml", stub.base_url, db_url, concurrency=4)
        code, out, _ = run(
            config, "generate", "--endpoint", "test", "--stage", "S3", "--factor", "subject",
            "--scenario", "self_study_guide", "--count", "3", "--into", "bench", "--json",
        )  # fmt: skip
        assert code == 0, out
        made = json.loads(out)
        # 3 items at up to 5 a call: one call asking for 3.
        assert (made["calls"], made["asked"], made["added"], made["complete"]) == (1, 3, 3, True)

        plan = ["plan", "--endpoint", "test", "--per-cell", "2", "--stage", "S1", "--factor",
                "personality", "--into", "bench", "--items-per-call", "2"]  # fmt: skip
        code, out, _ = run(config, *plan, "--dry-run", "--json")
        assert code == 0, out
        dry = json.loads(out)
        # personality has 6 scenarios; each S1 cell needs 2 items: one call of 2 each.
        assert (dry["cells"], dry["items_wanted"], dry["calls_planned"]) == (6, 12, 6)
        assert stub.state.requests == 1  # the dry run sent nothing

        code, out, _ = run(config, *plan, "--json")
        assert (code, json.loads(out)["added"], stub.state.requests) == (0, 12, 7)
        code, out, _ = run(config, *plan, "--json")
        again = json.loads(out)
        assert (code, again["cells_asked"], again["calls"], stub.state.requests) == (0, 0, 0, 7)

        code, out, _ = run(config, "show", "bench", "--json")
        assert json.loads(out)["stages"] == {"S1": 12, "S3": 3}


def test_rejections_are_printed_with_the_raw_reply(tmp_path: Path, db_url: str) -> None:
    with StubServer(responder=lambda messages: PROSE) as stub:
        config = write_config(tmp_path / "c.toml", stub.base_url, db_url)
        code, out, err = run(
            config, "generate", "--endpoint", "test", "--stage", "S1", "--factor", "gender",
            "--scenario", "career_counseling", "--count", "1",
        )  # fmt: skip
    assert code == 0
    # One call wanted, so 3 at most; each reply is the same prose.
    assert err.count("(not_json)") == 3 and err.count(f"raw: {PROSE}") == 3
    assert "0 items added as drafts of 1 wanted" in out
    assert "short: S1/gender/career_counseling: 0 of 1" in out


def test_unknown_names_exit_1_with_a_suggestion(tmp_path: Path, db_url: str) -> None:
    with StubServer() as stub:
        config = write_config(tmp_path / "c.toml", stub.base_url, db_url)
        done = fairjudge(
            "--config", config, "dataset", "generate", "--endpoint", "test",
            "--stage", "S1", "--factor", "gender", "--scenario", "Career Counseling",
        )  # fmt: skip
        assert stub.state.requests == 0
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "error: unknown scenario 'Career Counseling': did you mean 'career_counseling'?"
    )


def test_an_own_taxonomy_file_by_its_name_and_by_its_old_name(tmp_path: Path, db_url: str) -> None:
    # One factor of one's own with one scenario: 4 stages x 1 scenario = 4 cells (by hand),
    # whichever name the option is given by; --catalogue also says it is the old name.
    own = tmp_path / "own.toml"
    own.write_text(
        '[[scenarios]]\nid = "assembly_planning"\nname = "School Assembly Planning"\n'
        'description = "Who speaks at assemblies."\n'
        '[[factors]]\nid = "religion"\nname = "Religion or Belief"\n'
        'description = "Faith, or none."\nscenarios = ["assembly_planning"]\n'
    )
    with StubServer() as stub:
        config = write_config(tmp_path / "c.toml", stub.base_url, db_url)
        plan = ["plan", "--endpoint", "test", "--per-cell", "1", "--factor", "religion",
                "--dry-run", "--json"]  # fmt: skip
        for flag in ("--taxonomy", "--catalogue"):
            code, out, err = run(config, *plan, flag, str(own))
            assert code == 0, out + err
            assert json.loads(out)["cells"] == 4
            assert ("--catalogue is deprecated: use --taxonomy" in err) == (flag == "--catalogue")
        # Without the file the factor is unknown: the option was read, not ignored.
        without = CliRunner().invoke(cli, ["--config", str(config), "dataset", *plan])
        assert "unknown factor 'religion'" in str(without.exception)
        assert stub.state.requests == 0
