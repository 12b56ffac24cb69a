"""The final choice on every branch of its rule."""

import pytest

from showcase.runfolder.artefacts import VersionRecord
from showcase.run.final_choice import choose_final


def v(n: int, loaded: bool | None, t_s: float | None = None, last_seen: float | None = None) -> VersionRecord:
    sha = f"{n:02d}" * 32
    t = float(n * 10) if t_s is None else t_s
    return VersionRecord(
        n=n, event="seen", t_s=t, last_seen_t_s=last_seen if last_seen is not None else t, sha256=sha,
        size=100 + n, last_request_id=f"req-{n}", file=f"{n:04d}-{sha[:8]}.html", loaded_without_errors=loaded,
    )


def test_no_versions_means_no_page():
    choice = choose_final([], None)
    assert (choice.rule, choice.n, choice.sha256, choice.file) == ("no_page", None, None, None)
    assert choice.versions_seen == 0 and "no page" in choice.rule_text


def test_final_file_counts_when_it_loads():
    versions = [v(1, True), v(2, False), v(3, True)]
    choice = choose_final(versions, versions[2].sha256)
    assert (choice.rule, choice.n, choice.is_final_file) == ("final_file_loads", 3, True)
    assert [c.is_final_file for c in choice.candidates] == [False, False, True]
    assert choice.file == versions[2].file


def test_broken_final_file_gives_way_to_the_last_version_that_loads():
    versions = [v(1, True), v(2, True), v(3, False), v(4, False)]
    choice = choose_final(versions, versions[3].sha256)
    assert (choice.rule, choice.n, choice.is_final_file) == ("last_version_that_loads", 2, False)
    assert choice.rule_text.startswith("the final file (version 4) did not load without errors")
    assert "version 2 of 4" in choice.rule_text


def test_last_means_last_written_when_an_older_version_was_written_again():
    # 1 loads, 2 loads, then 1's bytes written again at 35 s, then broken 3 is final.
    versions = [v(1, True, t_s=10, last_seen=35), v(2, True, t_s=20), v(3, False, t_s=40)]
    choice = choose_final(versions, versions[2].sha256)
    assert (choice.rule, choice.n) == ("last_version_that_loads", 1)


def test_an_unchecked_final_file_is_not_taken_on_trust():
    versions = [v(1, True), v(2, None)]
    choice = choose_final(versions, versions[1].sha256)
    assert (choice.rule, choice.n) == ("last_version_that_loads", 1)
    assert "was never load-checked" in choice.rule_text


def test_when_nothing_loads_the_final_file_counts_anyway():
    versions = [v(1, False), v(2, False), v(3, None)]
    choice = choose_final(versions, versions[1].sha256)  # the agent went back to version 2's bytes
    assert (choice.rule, choice.n, choice.is_final_file) == ("final_file_none_loads", 2, True)
    assert "counts anyway" in choice.rule_text


def test_file_gone_at_the_end_takes_the_last_version_that_loads():
    versions = [v(1, True), v(2, False)]
    choice = choose_final(versions, None)
    assert (choice.rule, choice.n, choice.is_final_file) == ("last_version_that_loads", 1, False)
    assert choice.rule_text.startswith("there was no final file at the end")


def test_file_gone_and_nothing_loads_takes_the_last_version_seen():
    versions = [v(1, False), v(2, False)]
    choice = choose_final(versions, None)
    assert (choice.rule, choice.n, choice.is_final_file) == ("last_version_no_final_file", 2, False)


def test_a_final_file_the_watcher_never_kept_is_refused():
    with pytest.raises(ValueError, match="snapshot it first"):
        choose_final([v(1, True)], "ab" * 32)
    with pytest.raises(ValueError):
        choose_final([], "ab" * 32)
