"""check.json files of rubric 1.0 (tests/pages/check-rubric-1.0.json, written by the 1.0 check of
tests/pages/navigate_away.html) still read: as a CheckReport and in the run report."""

import json
import shutil
from pathlib import Path

from runfolder import make_run
from showcase.check.models import CheckReport
from showcase.check.rubric import load_rubric
from showcase.paths import CHECKS_DIR
from showcase.report.load import load_run

OLD = Path(__file__).resolve().parent / "pages" / "check-rubric-1.0.json"


def test_rubric_is_3_0_with_a_changelog_entry():
    version = load_rubric().version
    assert version == "3.0"
    assert f"## {version}" in (CHECKS_DIR / "CHANGELOG.md").read_text()


def test_a_rubric_1_0_check_json_still_reads(tmp_path):
    old = json.loads(OLD.read_text())
    assert old["rubric_version"] == "1.0" and "left" not in old
    report = CheckReport.model_validate(old)
    assert report.total == old["total"] and report.left is None and len(report.items) == 11
    run = make_run(tmp_path, "old-run", clip_source=None)
    shutil.copy(OLD, run / "check.json")
    loaded = load_run(run)
    assert loaded.score == old["total"] and loaded.check_summary == old["summary"]
    assert [i.id for i in loaded.items] == [i["id"] for i in old["items"]]
    assert [i.points for i in loaded.items] == [i["points"] for i in old["items"]]
