"""The Ray cluster that runs checks and runs (the `ray` extra): joining it and collecting its answers.

Each node that can take a job (a Docker engine, Chromium, the npm cache) says so with the custom
resource `showcase` (how many jobs at once). A node that dies mid-job: Ray runs the job again
elsewhere (RETRIES). What a job does is its caller's: check/remote.py scores pages,
batch/remote.py runs a batch's runs.
"""

import socket
import time

from showcase.errors import InfraError, UserError

RESOURCE = "showcase"
RETRIES = 3  # a job whose node died runs again on another, up to this many times
WAIT_S = 5.0
CONNECT_S = 10.0


def import_ray():
    try:
        import ray
    except ImportError:
        raise UserError("--ray needs Ray: pip install 'showcase[ray]'") from None
    return ray


def node_name() -> str:
    """host/node-id: two Ray nodes on one machine are told apart."""
    ray = import_ray()
    try:
        node_id = ray.get_runtime_context().get_node_id()
    except Exception:
        node_id = None
    return f"{socket.gethostname()}/{node_id[:12]}" if node_id else socket.gethostname()


def _answers(address: str) -> None:
    """A HOST:PORT that nothing answers on is one line now, not Ray's minutes of retries."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return  # "auto", ray://...: Ray's own forms, Ray's own waits
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_S).close()
    except OSError as exc:
        raise UserError(f"--ray {address}: no Ray cluster answers there ({exc.strerror or exc}); start one "
                        "(docs/batch.md) or give its head's HOST:PORT") from None


class RayCluster:
    def __init__(self, ray, address: str):
        self.ray, self.address, self.version = ray, address, ray.__version__

    @classmethod
    def connect(cls, address: str) -> "RayCluster":
        ray = import_ray()
        _answers(address)
        try:
            ray.init(address=address, log_to_driver=False, logging_level="ERROR", include_dashboard=False,
                     configure_logging=False)
        except Exception as exc:
            raise UserError(f"--ray {address}: cannot join the Ray cluster ({str(exc).splitlines()[0][:200]})") from None
        if not ray.cluster_resources().get(RESOURCE):
            ray.shutdown()
            raise UserError(f"--ray {address}: no node of that cluster offers the {RESOURCE!r} resource; start each node "
                            f"that has Docker, Chromium and the npm cache with --resources '{{\"{RESOURCE}\": 1}}'")
        return cls(ray, address)

    def close(self) -> None:
        self.ray.shutdown()


def each_done(ray, refs: dict):
    """(key, answer, None) or (key, None, the exception ray.get raised), as each job of refs ends."""
    while refs:
        ready, _ = ray.wait(list(refs), num_returns=1, timeout=WAIT_S)
        for ref in ready:
            key = refs.pop(ref)
            try:
                answer, error = ray.get(ref), None
            except Exception as exc:
                answer, error = None, exc
            yield key, answer, error


def first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__


def wait_for_resource(address: str, count: float, timeout_s: float = 120.0) -> None:
    """For scripts that start a cluster: wait (bounded) until `count` of the resource is offered."""
    ray = import_ray()
    ray.init(address=address, log_to_driver=False, logging_level="ERROR", include_dashboard=False)
    try:
        deadline = time.monotonic() + timeout_s
        while ray.cluster_resources().get(RESOURCE, 0) < count:
            if time.monotonic() > deadline:
                raise InfraError(f"the Ray cluster at {address} did not offer {count:g} {RESOURCE} within {timeout_s:.0f} s")
            time.sleep(0.5)
    finally:
        ray.shutdown()
