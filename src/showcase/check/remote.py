"""`showcase check --ray`: each page scored on a node of a Ray cluster (host/cluster.py), its
check.json and screenshot written here."""

import asyncio
import tempfile
from pathlib import Path

from showcase.check.models import CheckReport
from showcase.check.runner import check_page, write_report
from showcase.errors import InternalError, ShowcaseError
from showcase.host.cluster import RESOURCE, RETRIES, RayCluster, each_done, first_line, node_name
from showcase.io import write_bytes_atomic

SCREENSHOT_CAP_BYTES = 32 << 20


def _check_on_node(html: bytes, page_name: str, npm_dir: str | None) -> tuple[str, bytes | None, str]:
    with tempfile.TemporaryDirectory(prefix="showcase-check-") as tmp:
        shot = Path(tmp) / "screenshot.png"
        report = asyncio.run(check_page(html, npm_dir=Path(npm_dir) if npm_dir else None, screenshot_path=shot,
                                        page_name=page_name))
        png = None
        if shot.is_file() and shot.stat().st_size <= SCREENSHOT_CAP_BYTES:
            png = shot.read_bytes()
    return report.model_dump_json(), png, node_name()


def _check_pages(cluster: RayCluster, htmls: dict[Path, bytes], dirs: dict[Path, Path], npm_dir: Path | None):
    """The check of every page on the cluster; check.json and screenshot.png written here."""
    ray = cluster.ray
    remote = ray.remote(_check_on_node).options(num_cpus=1, resources={RESOURCE: 1}, max_retries=RETRIES)
    refs = {remote.remote(html, str(path), str(npm_dir) if npm_dir else None): path for path, html in htmls.items()}
    reports, failures, nodes = {}, {}, {}
    for path, answer, exc in each_done(ray, refs):
        if exc is not None:
            cause = getattr(exc, "cause", None)
            failures[path] = cause if isinstance(cause, ShowcaseError) else InternalError(first_line(exc))
            continue
        report_json, png, node = answer
        report = CheckReport.model_validate_json(report_json)
        write_report(report, dirs[path])
        if png is not None:
            write_bytes_atomic(dirs[path] / "screenshot.png", png)
        reports[path], nodes[path] = report, node
    return reports, failures, nodes


def check_on_ray(htmls: dict[Path, bytes], dirs: dict[Path, Path], npm_dir: Path | None, address: str):
    cluster = RayCluster.connect(address)
    try:
        return _check_pages(cluster, htmls, dirs, npm_dir)
    finally:
        cluster.ray.shutdown()
