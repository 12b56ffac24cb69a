"""Chromium sealed off from the host: an unprivileged user, its own sandbox, a network of its own.

Playwright starts LAUNCHER in place of Chromium. As root it chowns Playwright's fresh profile to
the browser user, enters a new network namespace (loopback only), drops to that user with no
capabilities and no way to regain any, and execs Chromium with a minimal environment. Not as
root, it enters a new user and network namespace instead (the nearest thing an ordinary user can
make). Either way Chromium's own sandbox stays on: flags that would turn it off are dropped.
Playwright's pipe to Chromium is fds 3 and 4, which every exec keeps.
"""

import os
import pwd
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from showcase.errors import InfraError

BROWSER_USER = os.environ.get("SHOWCASE_BROWSER_USER", "showcase-browser")
USER_FIX = "run scripts/setup.sh (it adds the system user), or: useradd --system --no-create-home --shell /usr/sbin/nologin --user-group"

# Whoever adds one of these, Chromium keeps its sandbox.
UNSEALING_FLAGS = (
    "--no-sandbox", "--no-zygote", "--single-process", "--disable-namespace-sandbox",
    "--disable-seccomp-filter-sandbox", "--disable-gpu-sandbox", "--in-process-gpu",
)

# No UDP for WebRTC unless through a proxy (there is none): with the empty network namespace,
# a page's RTCPeerConnection has neither a route nor a socket to use.
SEAL_ARGS = ["--force-webrtc-ip-handling-policy=disable_non_proxied_udp"]

# Runs as /bin/sh. Settings arrive as SHOWCASE_SEAL_* in its environment; Chromium gets none of it.
LAUNCHER = r"""#!/bin/sh
set -eu
fail() { echo "showcase-seal: $*" >&2; exit 3; }
chromium=${SHOWCASE_SEAL_CHROMIUM:?}
stage=${SHOWCASE_SEAL_STAGE:-start}
udd=
on=
off=
n=$#
while [ "$n" -gt 0 ]; do
  a=$1; shift; n=$((n - 1))
  case $a in
    @UNSEALING@) continue ;;
    --user-data-dir=*) udd=${a#--user-data-dir=} ;;
    # Chromium keeps only the last of each: Playwright's own list and ours are joined into one.
    --enable-features=*) on=${on:+$on,}${a#--enable-features=}; continue ;;
    --disable-features=*) off=${off:+$off,}${a#--disable-features=}; continue ;;
  esac
  set -- "$@" "$a"
done
[ -z "$on" ] || set -- "$@" "--enable-features=$on"
[ -z "$off" ] || set -- "$@" "--disable-features=$off"
[ -n "$udd" ] || fail "Playwright passed no --user-data-dir"
run_chromium() {
  exec env -i PATH=/usr/bin:/bin HOME="$udd" TMPDIR="$udd" XDG_CONFIG_HOME="$udd/.config" \
    XDG_CACHE_HOME="$udd/.cache" LANG=C.UTF-8 "$@"
}
case $stage in
  start)
    if [ "$(id -u)" = 0 ]; then
      # Playwright made the profile as root, mode 0700: the browser user must own it.
      chown "${SHOWCASE_SEAL_UID:?}:${SHOWCASE_SEAL_GID:?}" "$udd" || fail "cannot hand the profile $udd to the browser user"
      setpriv --reuid="$SHOWCASE_SEAL_UID" --regid="$SHOWCASE_SEAL_GID" --clear-groups -- test -w "$udd" -a -x "$udd" \
        || fail "the browser user cannot reach its profile $udd: give showcase a TMPDIR any user can enter"
      unshare --net true 2>/dev/null || fail "cannot make a network namespace for the browser (unshare --net): run showcase as root with CAP_SYS_ADMIN"
      SHOWCASE_SEAL_STAGE=root-netns exec unshare --net -- "$0" "$@"
    fi
    unshare --user --map-current-user --net true 2>/dev/null \
      || fail "cannot make a user and network namespace for the browser: allow unprivileged user namespaces, or run showcase as root after scripts/setup.sh"
    SHOWCASE_SEAL_STAGE=user-netns exec unshare --user --map-current-user --net -- "$0" "$@"
    ;;
  root-netns)
    ip link set lo up || fail "cannot bring loopback up in the browser's network namespace"
    run_chromium setpriv --reuid="$SHOWCASE_SEAL_UID" --regid="$SHOWCASE_SEAL_GID" --clear-groups \
      --inh-caps=-all --bounding-set=-all --no-new-privs -- "$chromium" "$@"
    ;;
  user-netns)
    # Loopback stays down here: bringing it up needs a capability Chromium must not inherit.
    run_chromium "$chromium" "$@"
    ;;
  *) fail "unknown stage $stage" ;;
esac
""".replace("@UNSEALING@", "|".join(UNSEALING_FLAGS))


@dataclass(frozen=True)
class Seal:
    """How the next browser is sealed: the launcher to start and the environment it needs."""

    launcher: Path
    env: dict[str, str]
    mode: str  # "browser user, own network namespace" or "user and network namespace"


def browser_account() -> tuple[int, int]:
    try:
        entry = pwd.getpwnam(BROWSER_USER)
    except KeyError:
        raise InfraError(f"the browser user {BROWSER_USER!r} is missing: {USER_FIX} {BROWSER_USER}") from None
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        raise InfraError(f"the browser user {BROWSER_USER!r} has uid or gid 0; it must be an unprivileged account")
    return entry.pw_uid, entry.pw_gid


def _need(tool: str, package: str) -> None:
    if not shutil.which(tool, path="/usr/sbin:/usr/bin:/sbin:/bin"):
        raise InfraError(f"{tool} is missing, needed to seal the browser: apt-get install {package}")


def prepare(chromium: str, folder: Path) -> Seal:
    """Write the launcher into `folder` (private to us) and check what it needs exists."""
    _need("unshare", "util-linux")
    env = {"SHOWCASE_SEAL_CHROMIUM": chromium, "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    if os.geteuid() == 0:
        uid, gid = browser_account()
        _need("setpriv", "util-linux")
        _need("ip", "iproute2")
        env |= {"SHOWCASE_SEAL_UID": str(uid), "SHOWCASE_SEAL_GID": str(gid)}
        mode = f"user {BROWSER_USER} (uid {uid}), own network namespace"
    else:
        mode = f"uid {os.geteuid()} in its own user and network namespace"
    launcher = folder / "chromium-sealed"
    fd = os.open(launcher, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o700)
    with os.fdopen(fd, "w") as handle:
        handle.write(LAUNCHER)
    return Seal(launcher=launcher, env=env, mode=mode)


def private_folder() -> tempfile.TemporaryDirectory:
    """A fresh folder for the launcher that only we can enter (mkdtemp makes it 0700)."""
    return tempfile.TemporaryDirectory(prefix="showcase-seal-")


def seal_error(text: str) -> str | None:
    """The launcher's own one-line reason, if the launch failed there (Playwright's error text
    carries Chromium's stderr as lines like "[pid=12][err] showcase-seal: ...")."""
    for line in text.splitlines():
        if "showcase-seal: " in line:
            return line.split("showcase-seal: ", 1)[1].strip()
    return None


# What /proc shows of a running sealed browser (for `showcase doctor` and the tests).


def _status(pid: int) -> dict[str, str]:
    text = Path(f"/proc/{pid}/status").read_text()
    return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def process_tree(pid: int) -> list[int]:
    seen, stack = [], [pid]
    while stack:
        p = stack.pop()
        seen.append(p)
        try:
            stack += _children(p)
        except OSError:
            continue
    return seen


def proc_type(pid: int) -> str:
    """Chromium's --type= of a process ("browser" for the one without it)."""
    try:
        # Chromium rewrites its children's command lines into one space-separated string.
        args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").split()
    except OSError:
        return "gone"
    for a in args:
        if a.startswith(b"--type="):
            return a[7:].decode(errors="replace")
    return "browser"


@dataclass(frozen=True)
class SealFacts:
    browser_uid: int
    renderer_uids: tuple[int, ...]
    own_network: bool  # the browser is in another network namespace than we are
    interfaces: tuple[str, ...]  # network interfaces the browser sees
    renderer_seccomp: tuple[int, ...]  # 2 = filtered: Chromium's seccomp-bpf sandbox is on
    renderer_own_pid_ns: bool  # Chromium's namespace sandbox put renderers in a pid namespace
    no_upstream_key: bool  # SHOWCASE_UPSTREAM_KEY is in no environment of the browser's processes

    @property
    def sealed(self) -> bool:
        return (
            self.browser_uid != 0
            and bool(self.renderer_uids)
            and 0 not in self.renderer_uids
            and self.own_network
            and set(self.interfaces) <= {"lo"}
            and all(s == 2 for s in self.renderer_seccomp)
            and self.renderer_own_pid_ns
            and self.no_upstream_key
        )

    def line(self) -> str:
        uids = sorted({self.browser_uid, *self.renderer_uids})
        sandbox = self.renderer_own_pid_ns and bool(self.renderer_seccomp) and all(s == 2 for s in self.renderer_seccomp)
        return (
            f"uid {', '.join(map(str, uids))}; Chromium sandbox {'on' if sandbox else 'OFF'} "
            f"(renderers: seccomp {sorted(set(self.renderer_seccomp))}, own pid namespace: {self.renderer_own_pid_ns}); "
            f"network: {'own namespace' if self.own_network else 'THE HOST’S'} ({', '.join(self.interfaces) or 'no interface'}); "
            f"upstream key in its environment: {'no' if self.no_upstream_key else 'YES'}"
        )


def browser_pid(marker: str) -> int | None:
    """The browser process (not a child: those carry --type=) whose command line holds `marker`."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{d}/cmdline").read_bytes()
            # The launcher and Debian's wrapper script carry the marker too until they exec Chromium.
            if marker.encode() in cmd and b"--type=" not in cmd and os.readlink(f"/proc/{d}/exe").endswith("/chromium"):
                return int(d)
        except OSError:
            continue
    return None


def seal_facts(browser_pid: int) -> SealFacts:
    tree = process_tree(browser_pid)
    renderers = [p for p in tree if proc_type(p) == "renderer"]
    own_pid_ns = os.readlink(f"/proc/{browser_pid}/ns/pid")
    uid = lambda p: int(_status(p)["Uid"].split()[1])  # effective uid
    with open(f"/proc/{browser_pid}/net/dev") as handle:
        interfaces = tuple(line.split(":", 1)[0].strip() for line in handle.read().splitlines()[2:])
    key_free = True
    for p in tree:
        try:
            key_free &= b"SHOWCASE_UPSTREAM_KEY" not in Path(f"/proc/{p}/environ").read_bytes()
        except OSError:
            continue  # a sandboxed process whose environ even root cannot read here is fine
    return SealFacts(
        browser_uid=uid(browser_pid),
        renderer_uids=tuple(uid(p) for p in renderers),
        own_network=os.readlink(f"/proc/{browser_pid}/ns/net") != os.readlink("/proc/self/ns/net"),
        interfaces=interfaces,
        renderer_seccomp=tuple(int(_status(p).get("Seccomp", "0")) for p in renderers),
        renderer_own_pid_ns=bool(renderers) and all(os.readlink(f"/proc/{p}/ns/pid") != own_pid_ns for p in renderers),
        no_upstream_key=key_free,
    )
