"""Which version of the page counts: the final file if it loads without errors, else the last
version that did; if none did, the final file anyway (the check scores it as it is)."""

from showcase.runfolder.artefacts import FinalCandidate, FinalChoice, VersionRecord


def _last_seen(record: VersionRecord) -> tuple[float, int]:
    # An older version written again later is "last" as of its rewrite.
    seen = record.last_seen_t_s if record.last_seen_t_s is not None else record.t_s
    return (seen if seen is not None else float("-inf"), record.n)


def _loaded_word(record: VersionRecord) -> str:
    if record.loaded_without_errors is None:
        return "was never load-checked" if record.check_failure is None else "could not be load-checked"
    return "did not load without errors"


def choose_final(versions: list[VersionRecord], final_file_sha256: str | None) -> FinalChoice:
    """Pick the version that counts.

    versions: every version seen (folded records). final_file_sha256: sha256 of the page file as
    left at the end (after the watcher's final snapshot); None when there was no file then.
    Raises ValueError if the final file's bytes are not among the versions (take the final
    snapshot first: the rule needs the final file's load-check result).
    """
    ordered = sorted(versions, key=lambda r: r.n)
    total = len(ordered)
    final = next((r for r in ordered if r.sha256 == final_file_sha256), None) if final_file_sha256 else None
    if final_file_sha256 and final is None:
        raise ValueError(f"the final file ({final_file_sha256[:12]}) is not among the versions seen; snapshot it first")
    candidates = [
        FinalCandidate(
            n=r.n, sha256=r.sha256, loaded_without_errors=r.loaded_without_errors, is_final_file=r is final
        )
        for r in ordered
    ]

    def chosen(record: VersionRecord, rule: str, text: str) -> FinalChoice:
        return FinalChoice(
            n=record.n, sha256=record.sha256, file=record.file, is_final_file=record is final,
            rule=rule, rule_text=text, versions_seen=total, candidates=candidates,
        )

    if not ordered:
        return FinalChoice(
            n=None, sha256=None, file=None, is_final_file=False, rule="no_page",
            rule_text="no version of the page was ever seen, so there is no page to score",
            versions_seen=0, candidates=[],
        )
    if final is not None and final.loaded_without_errors is True:
        return chosen(final, "final_file_loads", "the final file loads without errors, so it counts")

    loading = [r for r in ordered if r.loaded_without_errors is True]
    if loading:
        last_good = max(loading, key=_last_seen)
        why = (
            f"the final file (version {final.n}) {_loaded_word(final)}"
            if final is not None
            else "there was no final file at the end"
        )
        return chosen(
            last_good, "last_version_that_loads",
            f"{why}, so the last version that loaded without errors counts: version {last_good.n} of {total}",
        )
    if final is not None:
        return chosen(
            final, "final_file_none_loads",
            f"no version loaded without errors, so the final file (version {final.n} of {total}) counts anyway "
            "and is scored as it is",
        )
    last = max(ordered, key=_last_seen)
    return chosen(
        last, "last_version_no_final_file",
        f"there was no final file at the end and no version loaded without errors, so the last version "
        f"seen (version {last.n} of {total}) counts and is scored as it is",
    )
