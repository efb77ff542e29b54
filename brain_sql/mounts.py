"""Mount points: the folder a drive is mounted on, told from the folder itself.

An unplugged drive leaves its mount point, an ordinary folder, at the drive's path: a
note written there while the drive is out (Obsidian names every new note Untitled.md)
has the path of one of the drive's, and a prune that read it as the drive's kept the
folder and pruned the rest of the drive. The files of a mount point are told apart by
what the system mounts now, not by the files, so ingest records the mount points it
reads files from (pipeline) and, while one of them is not mounted, reads nothing under
it and prunes nothing under it.
"""

import os
import re

MOUNTS_KEY = "mount_points"  # brain_meta: a JSON list of the mount points ingest read files from


def mounted_now():
    """The folders something is mounted on now: /proc/self/mountinfo's on Linux (a bind
    mount of one file system too, which os.path.ismount does not tell), None elsewhere
    (os.path.ismount is asked, folder by folder)."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as info:
            return {_unescaped(fields[4]) for fields in (line.split() for line in info) if len(fields) > 4}
    except OSError:
        return None


def _unescaped(field):
    """A mountinfo path: a space, tab, newline or backslash is written as its octal escape."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


class Mounts:
    """What is mounted now, asked once a run: the mount point each folder is on."""

    def __init__(self):
        self.now = mounted_now()
        self.roots = {}

    def mounted(self, folder):
        """Whether a file system is mounted on `folder` (resolved) now."""
        return folder in self.now if self.now is not None else os.path.ismount(folder)

    def root(self, folder):
        """The mount point `folder` (resolved) is on: itself, or the nearest folder over it."""
        if folder not in self.roots:
            parent = os.path.dirname(folder)
            self.roots[folder] = folder if parent == folder or self.mounted(folder) else self.root(parent)
        return self.roots[folder]
