"""The conformance suite, for every registered backend: real attempts from inside a real sandbox.

One sandbox per backend serves all checks in suite order (the last one kills it). Negative controls
show the checks can fail: a sandbox started without the published limits must fail them.
"""

import pytest

from showcase.sandbox.base import known_backends
from showcase.sandbox.conformance import CHECK_NAMES, CHECKS, open_conformance, run_check
from showcase.sandbox.image import ensure_image

pytestmark = pytest.mark.docker

BY_NAME = {c.name: c for c in CHECKS}
CASES = [(backend, name) for backend in known_backends() for name in CHECK_NAMES]


@pytest.fixture(scope="module")
def image(docker_engine):
    return ensure_image(None)  # the base + user layer; built once per machine, then cached by hash


@pytest.fixture(scope="module")
def runs(image):
    """backend -> an open Conformance (started on first use, closed at the end of the module)."""
    opened, contexts = {}, []

    def get(backend):
        if backend not in opened:
            ctx = open_conformance(backend, image)
            opened[backend] = ctx.__enter__()
            contexts.append(ctx)
        return opened[backend]

    yield get
    for ctx in contexts:
        ctx.__exit__(None, None, None)


@pytest.mark.parametrize(("backend", "check"), CASES, ids=[f"{b}-{c}" for b, c in CASES])
def test_conformance(runs, backend, check):
    result = run_check(runs(backend), BY_NAME[check])
    print(f"{backend} {check}: {result.detail}")
    assert result.passed, result.detail


@pytest.mark.parametrize("backend", known_backends())
def test_checks_fail_on_a_sandbox_without_the_limits(image, backend):
    """Negative control: writable root, root user with capabilities -> those checks fail (they can fail)."""
    with open_conformance(backend, image, read_only_root=False, drop_capabilities=False,
                          no_new_privileges=False, user="0:0") as run:
        for name in ("read_only_root", "non_root_no_caps"):
            result = run_check(run, BY_NAME[name])
            print(f"control {name}: {result.detail}")
            assert not result.passed, f"{name} passed on a sandbox that should fail it: {result.detail}"


@pytest.mark.parametrize("backend", known_backends())
def test_disk_cap_check_fails_without_a_cap(image, backend):
    """Negative control: no disk cap -> /work takes what the host gives, and disk_cap says so."""
    with open_conformance(backend, image, disk=None) as run:
        result = run_check(run, BY_NAME["disk_cap"])
    print(f"control disk_cap: {result.detail}")
    assert not result.passed and "ENOSPC" not in result.detail.split(" (cap")[0], result.detail
