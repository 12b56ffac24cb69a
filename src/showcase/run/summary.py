"""The run in plain English: the sentences a reader sees first (the README's "The files of a run"), e.g.

"The agent ran 92.3 minutes, one try, no help; the finish-now message (from 90 minutes) was
sent 4 times, the first at 90.3 minutes. 92 requests, no error, none blocked, none shortened
(13,658,733 prompt tokens, 169,578 answer tokens)." and "13 versions of the page were seen on
the way and 10 loaded without errors; the last one counts."
"""

from showcase.gate.log import GateStats
from showcase.runfolder.artefacts import FinalChoice, RunInfo, VersionRecord

_ENDINGS = {
    "done": "",
    "exit": "",
    "killed_at_hard_stop": ", and was stopped at the hard stop",
    "crashed": ", and crashed",
    "oom": ", and was killed for lack of memory",
    "interrupted": ", and was stopped when showcase itself was interrupted",
}


def _minutes(seconds: float) -> str:
    """90 -> '90', 90.5 -> '90.5' (limits are round numbers; say them that way)."""
    return f"{seconds / 60:.1f}".removesuffix(".0")


def _count(n: int, one: str, many: str, zero: str) -> str:
    if n == 0:
        return zero
    return f"{n:,} {one if n == 1 else many}"


def run_sentences(info: RunInfo) -> str:
    """How long the agent ran, the finish-now message, the requests and tokens (two sentences)."""
    ran = f"The agent ran {info.minutes_run:.1f} minutes, one try, no help{_ENDINGS[info.agent_end]}"
    if info.disk_full:
        ran += ", with its disk space full"
    if info.finish_now_after_s is None:
        finish = "no finish-now message was set"
    else:
        finish = f"the finish-now message (from {_minutes(info.finish_now_after_s)} minutes) "
        first = "" if info.finish_now_first_s is None else f"{info.finish_now_first_s / 60:.1f} minutes"
        if info.finish_now_sent == 0:
            finish += "was never sent"
        elif info.finish_now_sent == 1:
            finish += f"was sent once, at {first}" if first else "was sent once"
        else:
            finish += f"was sent {info.finish_now_sent:,} times" + (f", the first at {first}" if first else "")
    return f"{ran}; {finish}. {_requests(info)}."


def _requests(figures: RunInfo | GateStats) -> str:
    """'92 requests, no error, none blocked, none shortened (13,658,733 prompt tokens, 169,578 answer tokens)';
    requests that never completed are said after the count: '45 requests, 40 never completed, no error, ...'"""
    requests = _count(figures.requests, "request", "requests", "no request")
    requests = requests[0].upper() + requests[1:]
    unfinished = [f"{figures.not_completed:,} never completed"] if figures.not_completed else []
    counts = ", ".join(
        [
            requests,
            *unfinished,
            _count(figures.errors, "error", "errors", "no error"),
            "none blocked" if figures.blocked == 0 else f"{figures.blocked:,} blocked",
            "none shortened" if figures.shortened == 0 else f"{figures.shortened:,} shortened",
        ]
    )
    tokens = (
        f"{figures.prompt_tokens:,} prompt token{'' if figures.prompt_tokens == 1 else 's'}, "
        f"{figures.answer_tokens:,} answer token{'' if figures.answer_tokens == 1 else 's'}"
    )
    return f"{counts} ({tokens})"


def unfinished_run_sentences(last_record_s: float | None, stats: GateStats | None) -> str:
    """The run sentences of a run that never got its run-info.json (killed before it was finalized)."""
    if last_record_s is None:
        ran = "The run's end was not recorded, nor any time on its clock."
    else:
        ran = f"The run's end was not recorded; its last record is from {last_record_s / 60:.1f} minutes."
    return ran if stats is None else f"{ran} {_requests(stats)}."


def _which_counts(choice: FinalChoice | None, total: int) -> str:
    if choice is None:
        return "no version was chosen"
    if choice.rule == "final_file_loads":
        return "it counts" if total == 1 else "the last one counts"
    if choice.rule == "final_file_none_loads":
        return "it counts anyway" if total == 1 else "the last one counts anyway"
    final = next((c for c in choice.candidates if c.is_final_file), None)
    if final is None:
        why = "there was no final file at the end"
    elif final.loaded_without_errors is None:
        why = "the final file was never load-checked"
    else:
        why = "the final file did not load without errors"
    return f"version {choice.n} of {total} counts: {why}"


def versions_sentence(versions: list[VersionRecord], choice: FinalChoice | None) -> str:
    """How many versions were seen, how many loaded, and which one counts (one sentence).

    choice None: the run was never finalized, so no version was chosen."""
    total = len(versions)
    if total == 0 or (choice is not None and choice.n is None):
        return "No version of the page was seen; there is no page to score."
    loaded = sum(1 for v in versions if v.loaded_without_errors is True)
    unchecked = sum(1 for v in versions if v.loaded_without_errors is None)
    if total == 1:
        only = versions[0]
        state = {True: "it loaded without errors", False: "it did not load without errors"}.get(
            only.loaded_without_errors, "it was never load-checked"
        )
        return f"One version of the page was seen on the way and {state}; {_which_counts(choice, 1)}."
    if loaded == 0:
        state = "none loaded without errors"
    elif loaded == total:
        state = "all loaded without errors"
    else:
        state = f"{loaded:,} loaded without errors"
    if unchecked and loaded != total:
        state += f" ({unchecked:,} never load-checked)"
    return f"{total:,} versions of the page were seen on the way and {state}; {_which_counts(choice, total)}."


def with_summary(info: RunInfo, versions: list[VersionRecord], choice: FinalChoice) -> RunInfo:
    """The RunInfo with its two summary fields filled in."""
    return info.model_copy(
        update={"summary_run": run_sentences(info), "summary_versions": versions_sentence(versions, choice)}
    )
