"""Mount points: the folder a drive is mounted on, told from the folder itself.

An unplugged drive leaves its mount point, an ordinary folder, at the drive's path: a
note written there while the drive is out (Obsidian names every new note Untitled.md)
has the path of one of the drive's, and a prune that read it as the drive's kept the
folder and pruned the rest of the drive. The files of a mount point are told apart by
what the system mounts now, not by the files, so ingest records the mount points it
reads files from, each with its file system's device and size (pipeline), and while one
of them holds another file system, reads nothing there and prunes nothing there.

A drive is a file system of its own: a folder on another device than the folder it is
in (os.path.ismount, on every system). A bind mount of a folder of the same file system
(systemd's ReadWritePaths) is none. One seen so only in a container (the vault bound in
over the container's own root) is recorded, but with its device, which the host sees
there too: still there to the host (review 148). A drive replugged may come back as
another device (sdc1 where it was sdb1), so a mount point is also there when something is
mounted on it of the recorded size; the empty mount point bound elsewhere (a login
script's bind, a container's volume started without the drive) is mounted, but of the
size of the file system it is a folder of (review 149).
"""

import os

MOUNTS_KEY = "mount_points"  # brain_meta: {mount point: its file system's identity} of those ingest read files from


def _device(folder):
    try:
        return os.stat(folder).st_dev
    except OSError:
        return None


def _size(folder):
    """A file system's size (its block size, blocks and inodes): the same on every plug."""
    try:
        found = os.statvfs(folder)
    except OSError:
        return None
    return [found.f_frsize, found.f_blocks, found.f_files]


def identity(folder):
    """What tells the file system on `folder` (a mount point's) from another: its device and size."""
    return {"device": _device(folder), "size": _size(folder)}


class Mounts:
    """The mount point each folder is on, looked at once a run, and which of the
    `recorded` ({mount point: identity}) are out: not of the recorded size now, or
    neither a mount point now nor on the recorded device (an unplugged drive's folder; a
    folder gone; the empty mount point bound in)."""

    def __init__(self, recorded):
        self.roots, self.devices = {}, {}
        self.recorded = recorded
        self.out = sorted(m for m, known in recorded.items() if not self.there(m, known))

    def there(self, folder, known):
        return _size(folder) == known["size"] and (self.mounted(folder) or _device(folder) == known["device"])

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
            if parent == folder:
                self.roots[folder] = folder
                self.devices[folder] = _device(folder)
            else:
                self.root(parent)  # first: the parent's device is then known
                device = self.devices.setdefault(folder, _device(folder))
                self.roots[folder] = folder if device != self.devices[parent] else self.roots[parent]
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
