"""The command line: `python run.py [COMMAND] [options]`, `run` when no command is named.

A shim kept for every documented invocation: the commands are the modules of `cli/` (`cli.main`)."""

import sys

from cli.main import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
