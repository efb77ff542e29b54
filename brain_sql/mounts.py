"""Mount points: the folder a drive is mounted on, told from the folder itself.

An unplugged drive leaves its mount point, an ordinary folder, at the drive's path: a
note written there while the drive is out (Obsidian names every new note Untitled.md)
has the path of one of the drive's, and a prune that read it as the drive's kept the
folder and pruned the rest of the drive. The files of a mount point are told apart by
what the system mounts now, not by the files, so ingest records the mount points it
reads files from, each with its file system's device (pipeline), and while one of them
holds no file system of its own, reads nothing there and prunes nothing there.

A drive is a file system of its own: a folder on another device than the folder it is
in (os.path.ismount, on every system). A bind mount of a folder of the same file system
(systemd's ReadWritePaths) is none. One seen so only in a container (the vault bound in
over the container's own root) is recorded, but with its device, which the host sees
there too: still there to the host (review 148). A drive replugged may come back as
another device (sdc1 where it was sdb1), so a mount point is there whenever a file
system of its own is mounted on it; but not the empty mount point bound in elsewhere (a
login script's bind with the drive out), whose device is that of a folder over it: the
file system it is a folder of (review 149). A file system's size is no identity: XFS,
ZFS and APFS count their inodes from the free space, and a partition grows (review 150).
"""

import os

MOUNTS_KEY = "mount_points"  # brain_meta: {mount point: {"device": its device}} of those ingest read files from


def _device(folder):
    try:
        return os.stat(folder).st_dev
    except OSError:
        return None


def _within(path, folder):
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def identity(folder):
    """What is recorded of the file system on `folder`, a mount point: its device."""
    return {"device": _device(folder)}


class Mounts:
    """The mount point each folder is on, looked at once a run, and which of the
    `recorded` ({mount point: identity}) that the run's `paths` (resolved) are in or hold
    are out: neither on the recorded device now nor a mount point of a file system of
    its own (an unplugged drive's folder; a folder gone; the empty mount point bound in).
    Only those are looked at: a network share once read, hung now, stalls no run of
    another folder."""

    def __init__(self, recorded, paths):
        self.roots, self.devices = {}, {}
        self.recorded = recorded
        self.out = sorted(
            m
            for m, known in recorded.items()
            if any(_within(p, m) or _within(m, p) for p in paths) and not self.there(m, known)
        )

    def device(self, folder):
        """`folder`'s device (None where it cannot be looked at), one stat a run."""
        if folder not in self.devices:
            self.devices[folder] = _device(folder)
        return self.devices[folder]

    def there(self, folder, known):
        device = self.device(folder)
        if device is None:
            return False
        if device == known["device"]:
            return True
        if not self.mounted(folder):
            return False
        over = os.path.dirname(folder)  # a folder over it on the same device: one of that file system, bound in
        while over != os.path.dirname(over) and self.device(over) != device:
            over = os.path.dirname(over)
        return self.device(over) != device

    @staticmethod
    def mounted(folder):
        """Whether a file system of its own is mounted on `folder` (resolved) now."""
        return os.path.ismount(folder)

    def root(self, folder):
        """The mount point `folder` (resolved) is on: itself, or the nearest folder over it
        (the nearest whose device is not its parent's: one stat a folder, as ismount's
        test, and a bind mount of the same file system no mount point either)."""
        if folder not in self.roots:
            parent = os.path.dirname(folder)
            if parent == folder or self.device(folder) != self.device(parent):
                self.roots[folder] = folder
            else:
                self.roots[folder] = self.root(parent)
        return self.roots[folder]

    def out_of(self, path):
        """The recorded mount point `path` (a file's, resolved) is under that is out, unless
        a file system mounted inside it holds the path (a container's volume): else None."""
        for m in self.out:
            if path.startswith(m + os.sep):
                folder = os.path.dirname(path)
                while not os.path.isdir(folder) and folder.startswith(m + os.sep):
                    folder = os.path.dirname(folder)  # a gone file's: the nearest folder there
                return None if self.root(folder).startswith(m + os.sep) else m
        return None

    def found(self, paths):
        """{mount point: identity} of the files `paths` (resolved), but /."""
        roots = {self.root(os.path.dirname(path)) for path in paths} - {os.sep}
        return {m: identity(m) for m in roots}
