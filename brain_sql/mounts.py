"""Mount points: the folder a drive is mounted on, told from the folder itself.

An unplugged drive leaves its mount point, an ordinary folder, at the drive's path: a
note written there while the drive is out (Obsidian names every new note Untitled.md)
has the path of one of the drive's, and a prune that read it as the drive's kept the
folder and pruned the rest of the drive. The files of a mount point are told apart by
what the system mounts now, not by the files, so ingest records the mount points it
reads files from (pipeline) and, while one of them is not mounted, reads nothing under
it and prunes nothing under it.

A drive is a file system of its own: a folder on another device than the folder it is
in (os.path.ismount, on every system). A bind mount of a folder of the same file system
(a container's volume, systemd's ReadWritePaths) is no drive: a service seeing the vault
so would record it, and the user's own shell, which does not, would read none of it
(review 147).
"""

import os

MOUNTS_KEY = "mount_points"  # brain_meta: a JSON list of the mount points ingest read files from


class Mounts:
    """The mount point each folder is on, looked at once a run."""

    def __init__(self):
        self.roots = {}

    @staticmethod
    def mounted(folder):
        """Whether a file system of its own is mounted on `folder` (resolved) now."""
        return os.path.ismount(folder)

    def root(self, folder):
        """The mount point `folder` (resolved) is on: itself, or the nearest folder over it."""
        if folder not in self.roots:
            parent = os.path.dirname(folder)
            self.roots[folder] = folder if parent == folder or self.mounted(folder) else self.root(parent)
        return self.roots[folder]
