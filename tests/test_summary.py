"""The run's plain-English sentences, on the spec's example and the awkward cases."""

from showcase.run.final_choice import choose_final
from showcase.run.summary import run_sentences, versions_sentence, with_summary
from showcase.runfolder.artefacts import ContainerLimits, RunInfo, VersionRecord


def info(**changes) -> RunInfo:
    base = dict(
        started_at="2026-11-30T08:00:00+00:00", ended_at="2026-11-30T09:32:18+00:00", minutes_run=92.3,
        agent_end="done", finish_now_after_s=5400, finish_now_sent=4, finish_now_first_s=5418,
        requests=92, errors=0, blocked=0, shortened=0, prompt_tokens=13_658_733, answer_tokens=169_578,
        versions_seen=13, versions_loaded_without_errors=10,
        container_limits=ContainerLimits(memory_bytes=8 << 30, cpus=2, pids=512), world_title="Blocks",
    )
    base.update(changes)
    return RunInfo(**base)


def versions(loaded: list[bool | None]) -> list[VersionRecord]:
    return [
        VersionRecord(
            n=n, event="seen", t_s=n * 60.0, sha256=f"{n:02d}" * 32, size=1000, last_request_id=None,
            file=f"{n:04d}-{n:02d}{n:02d}{n:02d}{n:02d}.html", loaded_without_errors=ok,
        )
        for n, ok in enumerate(loaded, start=1)
    ]


def test_the_spec_example_word_for_word():
    vs = versions([True] * 5 + [False, True, False, True, True, False, True, True])  # 13 seen, 10 loaded
    choice = choose_final(vs, vs[-1].sha256)
    filled = with_summary(info(), vs, choice)
    assert filled.summary_run == (
        "The agent ran 92.3 minutes, one try, no help; the finish-now message (from 90 minutes) was sent "
        "4 times, the first at 90.3 minutes. 92 requests, no error, none blocked, none shortened "
        "(13,658,733 prompt tokens, 169,578 answer tokens)."
    )
    assert filled.summary_versions == (
        "13 versions of the page were seen on the way and 10 loaded without errors; the last one counts."
    )


def test_never_sent_once_and_singulars():
    text = run_sentences(info(finish_now_sent=0, finish_now_first_s=None, requests=1, errors=1, blocked=1,
                              shortened=3, prompt_tokens=1, answer_tokens=0, minutes_run=12.0))
    assert text == (
        "The agent ran 12.0 minutes, one try, no help; the finish-now message (from 90 minutes) was never sent. "
        "1 request, 1 error, 1 blocked, 3 shortened (1 prompt token, 0 answer tokens)."
    )
    once = run_sentences(info(finish_now_sent=1, finish_now_first_s=5430, finish_now_after_s=5430))
    assert "the finish-now message (from 90.5 minutes) was sent once, at 90.5 minutes." in once


def test_requests_that_never_completed_are_said():
    text = run_sentences(info(requests=45, not_completed=40))
    assert text.endswith("45 requests, 40 never completed, no error, none blocked, none shortened "
                         "(13,658,733 prompt tokens, 169,578 answer tokens).")


def test_no_requests_and_how_the_agent_ended():
    text = run_sentences(info(requests=0, prompt_tokens=0, answer_tokens=0, agent_end="crashed",
                              finish_now_after_s=None, finish_now_sent=0, finish_now_first_s=None))
    assert text == (
        "The agent ran 92.3 minutes, one try, no help, and crashed; no finish-now message was set. "
        "No request, no error, none blocked, none shortened (0 prompt tokens, 0 answer tokens)."
    )
    assert ", and was stopped at the hard stop;" in run_sentences(info(agent_end="killed_at_hard_stop"))
    assert ", and was killed for lack of memory;" in run_sentences(info(agent_end="oom"))


def test_an_earlier_version_counts_when_the_final_file_is_broken():
    vs = versions([True] * 7 + [False] * 6)
    choice = choose_final(vs, vs[-1].sha256)
    assert versions_sentence(vs, choice) == (
        "13 versions of the page were seen on the way and 7 loaded without errors; "
        "version 7 of 13 counts: the final file did not load without errors."
    )


def test_no_final_file_none_loaded_and_all_loaded():
    vs = versions([True, True, False])
    assert versions_sentence(vs, choose_final(vs, None)).endswith(
        "and 2 loaded without errors; version 2 of 3 counts: there was no final file at the end."
    )
    bad = versions([False, False])
    assert versions_sentence(bad, choose_final(bad, bad[-1].sha256)) == (
        "2 versions of the page were seen on the way and none loaded without errors; the last one counts anyway."
    )
    good = versions([True, True])
    assert "and all loaded without errors; the last one counts." in versions_sentence(good, choose_final(good, good[1].sha256))


def test_unchecked_versions_are_said_so():
    vs = versions([True, None, None])
    sentence = versions_sentence(vs, choose_final(vs, vs[-1].sha256))
    assert sentence == (
        "3 versions of the page were seen on the way and 1 loaded without errors (2 never load-checked); "
        "version 1 of 3 counts: the final file was never load-checked."
    )


def test_one_version_and_none():
    one = versions([True])
    assert versions_sentence(one, choose_final(one, one[0].sha256)) == (
        "One version of the page was seen on the way and it loaded without errors; it counts."
    )
    broken = versions([False])
    assert versions_sentence(broken, choose_final(broken, broken[0].sha256)) == (
        "One version of the page was seen on the way and it did not load without errors; it counts anyway."
    )
    assert versions_sentence([], choose_final([], None)) == "No version of the page was seen; there is no page to score."


def test_a_full_disk_is_said_in_the_run_sentence():
    said = run_sentences(info(disk_full=True, agent_end="killed_at_hard_stop"))
    assert said.startswith(
        "The agent ran 92.3 minutes, one try, no help, and was stopped at the hard stop, with its disk space full;"
    )
    assert "disk" not in run_sentences(info())


def test_a_run_killed_before_finalize_says_what_it_left():
    from showcase.gate.log import GateStats
    from showcase.run.summary import unfinished_run_sentences

    stats = GateStats(started_at="t", updated_at="t", requests=12, errors=1, prompt_tokens=500, answer_tokens=1)
    assert unfinished_run_sentences(2772.0, stats) == (
        "The run's end was not recorded; its last record is from 46.2 minutes. "
        "12 requests, 1 error, none blocked, none shortened (500 prompt tokens, 1 answer token)."
    )
    assert unfinished_run_sentences(None, None) == "The run's end was not recorded, nor any time on its clock."
    four = versions([True, True, False, None])
    assert versions_sentence(four, None) == (
        "4 versions of the page were seen on the way and 2 loaded without errors (1 never load-checked); "
        "no version was chosen."
    )
