"""The static HTML report: one page per run, one page comparing runs."""

from showcase.report.render import write_comparison, write_run_report

__all__ = ["write_run_report", "write_comparison"]
