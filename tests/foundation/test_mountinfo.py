"""Storage path from mountinfo: longest prefix, escapes, bind mounts, findings."""

from __future__ import annotations

import pytest

from fabricguard.storage.mountinfo import MountinfoError, check_path, find_mount, parse_mountinfo

# A training pod on GKE with Managed Lustre at /mnt/lustre, bound from a per-job subdirectory.
POD = """\
1650 1480 0:312 / / rw,relatime master:420 - overlay overlay rw,lowerdir=/var/lib/containerd/l/1,upperdir=/u,workdir=/w
1651 1650 0:315 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
1652 1650 0:316 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755
1660 1650 0:88 /ml-team/llm-sft-7/ /mnt/lustre rw,relatime - lustre 10.1.0.5@tcp:/lfsfs rw,flock,lazystatfs
1661 1650 0:317 / /dev/shm rw,nosuid,nodev - tmpfs shm rw,size=268435456k
1662 1650 254:1 /var/lib/kubelet/pods/abc/volumes/kubernetes.io~empty-dir/scratch /scratch rw,relatime - ext4 /dev/nvme0n1 rw
1663 1650 0:320 / /mnt/data\\040set rw - nfs4 10.0.0.2:/export rw,vers=4.1
"""


def test_longest_prefix_wins() -> None:
    e = parse_mountinfo(POD)
    m = find_mount(e, "/mnt/lustre/ckpt/step-100/model.pt")
    assert m is not None and m.fstype == "lustre"
    assert m.source == "10.1.0.5@tcp:/lfsfs"
    assert m.is_bind and m.root == "/ml-team/llm-sft-7/"
    assert find_mount(e, "/mnt/lustrex/file").fstype == "overlay"  # a prefix of the name is not a parent
    assert find_mount(e, "/dev/shm/x").fstype == "tmpfs"


def test_octal_escapes_are_decoded() -> None:
    m = find_mount(parse_mountinfo(POD), "/mnt/data set/train.bin")
    assert m is not None and m.fstype == "nfs4"


def test_path_normalisation() -> None:
    e = parse_mountinfo(POD)
    assert find_mount(e, "/mnt/lustre/../lustre/a").fstype == "lustre"
    assert find_mount(e, "mnt/lustre").fstype == "lustre"


def test_later_mount_shadows_earlier_on_same_point() -> None:
    text = POD + "1700 1650 0:400 / /mnt/lustre rw - tmpfs tmpfs rw\n"
    assert find_mount(parse_mountinfo(text), "/mnt/lustre/x").fstype == "tmpfs"


@pytest.mark.parametrize(
    ("path", "ok", "fragment"),
    [
        ("/mnt/lustre/job", True, "is on lustre"),
        ("/checkpoints", False, "container's writable layer"),
        ("/dev/shm/a", False, "node memory"),
        ("/mnt/data set", False, "NFS is not"),
        ("/scratch/a", False, "ext4"),
    ],
)
def test_check_path(path: str, ok: bool, fragment: str) -> None:
    f = check_path(parse_mountinfo(POD), path)
    assert f.ok is ok
    assert fragment in f.message


def test_malformed_line_names_line_number() -> None:
    with pytest.raises(MountinfoError, match="line 2"):
        parse_mountinfo("1 0 0:1 / / rw - ext4 /dev/a rw\ngarbage line without separator\n")
