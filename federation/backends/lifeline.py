"""Tie a harness child process to its parent: when the parent dies, even by SIGKILL (so neither
``atexit`` nor ``finally`` runs in it), the kernel sends the child SIGTERM
(``prctl(PR_SET_PDEATHSIG)``, Linux). Used by every process the harness starts.

As a launcher: ``python -m federation.backends.lifeline <parent pid> <cmd> [args...]`` arms the
signal and ``exec``s ``cmd`` (the death signal survives ``exec``); used for ``stress-ng``.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int, sig: int = signal.SIGTERM) -> None:
    """Arm the parent-death signal; exit at once if ``parent_pid`` is already gone (the child was
    re-parented before the signal was armed). No-op where ``prctl`` is unavailable."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent_pid:
        os._exit(0)


def main() -> None:
    parent, cmd = int(sys.argv[1]), sys.argv[2:]
    die_with_parent(parent)
    os.execvp(cmd[0], cmd)


if __name__ == "__main__":
    main()
