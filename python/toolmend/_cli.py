"""The ``toolmend`` command of the wheel: the Rust command line, in this process.

``pip install ./python`` installs this as the ``toolmend`` console script, so the
library and the command come together (as ruff and uv do). It is not a second
implementation: ``toolmend._core.run_cli`` runs ``toolmend_cli::run``, the code of the
``cargo install`` binary, so every subcommand and option is the same.
"""

import os
import signal
import sys

from toolmend._core import run_cli


def main() -> int:
    # Python turns SIGINT into KeyboardInterrupt, which it can raise only when Python
    # code runs: inside the Rust command Ctrl-C would then do nothing. The binary's
    # behaviour instead: the default action, unless the command handles the signal
    # itself (`serve` drains on Ctrl-C and SIGTERM).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    # What Python buffered so far reaches the terminal before the command writes.
    sys.stdout.flush()
    sys.stderr.flush()
    prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "toolmend"
    return run_cli([prog, *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
