"""``fabricguard storage where``: which filesystem backs a path, from a saved mountinfo file."""

from __future__ import annotations

from pathlib import Path

import typer

from fabricguard.console import exit_code, fail, print_json, say
from fabricguard.exitcodes import EXIT_FAILED
from fabricguard.options import JSON_ALIAS, Format, format_option, wants_json
from fabricguard.storage.mountinfo import MountinfoError, check_path, parse_mountinfo
from fabricguard.userfiles import SourceError, read_text

app = typer.Typer(help="Storage path checks.", no_args_is_help=True)


@app.command("where")
def where(
    path: str = typer.Argument(..., help="Path inside the pod, e.g. /mnt/lustre."),
    mountinfo: Path = typer.Option(Path("/proc/self/mountinfo"), "--mountinfo", help="A saved mountinfo file."),
    expect: str = typer.Option("lustre", "--expect", help="Filesystem type the path should be on."),
    fmt: Format = format_option(),
    as_json: bool = JSON_ALIAS,
) -> None:
    """Exit 0 when PATH is on the expected filesystem, 1 (degraded) when it is not, 3 for a bad file."""
    try:
        entries = parse_mountinfo(read_text(mountinfo))
    except SourceError as exc:
        fail(f"--mountinfo {exc}", hint="save /proc/self/mountinfo from inside the pod")
    except MountinfoError as exc:
        fail(f"--mountinfo {mountinfo}: {exc}", hint="save /proc/self/mountinfo from inside the pod as it is")
    finding = check_path(entries, path, expect)
    verdict = "pass" if finding.ok else "degraded"
    if wants_json(fmt, as_json):
        print_json({"verdict": verdict, **finding.to_dict()}, "StorageWhere")
    else:
        say(("✓ ", "green") if finding.ok else ("✗ ", "bold red"), finding.message)
    raise typer.Exit(exit_code(verdict))


# What Kubernetes accepts as runAsUser/runAsGroup/fsGroup (an int32 >= 0). Past it, chown overflows, and
# 4294967295 is chown's "leave it as it is".
MAX_ID = 2**31 - 1


def _octal_mode(text: str) -> int:
    try:
        mode = int(text, 8)
    except ValueError:
        fail(f"--mode {text!r} is not an octal mode", hint="e.g. --mode 2775")
    if not 0 <= mode <= 0o7777:
        fail(f"--mode {text!r} is out of range", hint="e.g. --mode 2775")
    return mode


@app.command("job-dir")
def job_dir(
    root: Path = typer.Option(..., "--root", help="The namespace's directory as mounted in this container (the "
                              "job's directory itself without --path)."),
    path: str | None = typer.Option(None, "--path", help="The job's directory under --root, e.g. llm-7b or "
                                    "team-a/llm-7b (default: --root is the job's directory)."),
    subdir: list[str] = typer.Option([], "--subdir", help="A directory under the job's to make as well "
                                     "(the NCCL log and Inspector directories); repeatable."),
    uid: int | None = typer.Option(None, "--uid", min=0, max=MAX_ID, help="The workload's user: owns the directories."),
    gid: int | None = typer.Option(None, "--gid", min=0, max=MAX_ID,
                                   help="The workload's group (fsGroup): owns them too."),
    mode: str = typer.Option("1777", "--mode", help="Octal mode of the directories (2775 with a group)."),
    expect_namespace_dir: str | None = typer.Option(
        None, "--expect-namespace-dir", help="Refuse (exit 2) unless --root is this namespace directory, as "
        "`storage namespace-dirs` marked it (a claim rooted at the namespace's directory)."),
) -> None:
    """Create the job's directory for a non-root workload, never through a link (the webhook's init
    container). Exit 0 done, 2 the file system refused, 3 a link or a non-directory in the way."""
    from fabricguard.storage.jobdir import JobDirError, NotRooted, Owner, check_namespace_root, prepare

    owner = Owner(uid, gid, _octal_mode(mode))
    if not root.is_dir():
        fail(f"--root: {root} is not a directory here",
             hint="mount the namespace's directory at --root in this container (the init container's volumeMount)")
    try:
        if expect_namespace_dir:
            check_namespace_root(root, expect_namespace_dir)
        done = prepare(root, path, subdir, owner)
    except SourceError as exc:
        if exc.source in ("--path", "--subdir"):
            fail(str(exc), hint="give --path as <job> below --root (or leave it out when --root is the job's "
                                "directory) and --subdir relative to it, e.g. nccl-logs")
        fail(str(exc), hint="the job's directory must be a plain directory; a person removes what is in the way")
    except NotRooted as exc:
        fail(str(exc), code=EXIT_FAILED,
             hint="when no pod of the namespace mounts it: kubectl -n NS delete pvc CLAIM && kubectl delete pv "
                  "fabricguard-CLAIM-NS, apply 10-storage (fabricguard preflight names each), then resubmit the job")
    except JobDirError as exc:
        fail(str(exc), code=EXIT_FAILED,
             hint="give the container CAP_CHOWN and CAP_FOWNER as root, or storage.lustre.jobDirectory.enabled: "
                  "false in the profile")
    if not done:
        say(("✓ ", "green"), f"{root / path if path else root}: already there, {owner.describe()}")
    for line in done:
        say(("✓ ", "green"), line)


@app.command("namespace-dirs")
def namespace_dirs(
    root: Path = typer.Option(..., "--root", help="The Lustre file system's root as mounted in this container."),
    directory: list[str] = typer.Argument(..., help="Each training namespace's directory under --root, e.g. "
                                          "ml-training (what its PersistentVolume is rooted at)."),
) -> None:
    """Make each training namespace's directory (root's, 0755, marked with its name), never through a link, before
    its volume rooted there is mounted (the install's Job). Exit 0 done, 2 refused, 3 a link or a non-directory."""
    from fabricguard.storage.jobdir import NAMESPACE_MARK, JobDirError, Owner, mark_namespace, parts_of, prepare

    if not root.is_dir():
        fail(f"--root: {root} is not a directory here", hint="mount the file system's root claim at --root")
    for d in directory:  # every argument named as itself, before any directory is made
        try:
            parts_of(d, "DIRECTORY")
        except SourceError as exc:
            fail(str(exc), hint="name each directory relative to --root, e.g. ml-training")
    owner = Owner(None, None, 0o755)
    for d in directory:
        try:
            done = prepare(root, d, [], owner)
            if mark_namespace(root, d):
                done.append(f"{root / d / NAMESPACE_MARK}: written")
        except SourceError as exc:
            fail(str(exc), hint="name each directory relative to --root, and remove a link or file in its place")
        except JobDirError as exc:
            fail(str(exc), code=EXIT_FAILED, hint="run as root with CAP_CHOWN and CAP_FOWNER on a file system that "
                 "does not squash root, or make the directories by hand (root's, 0755)")
        for line in done or [f"{root / d}: already there, {owner.describe()}"]:
            say(("✓ ", "green"), line)
