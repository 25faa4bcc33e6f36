"""`python -m hpcai`: the console script's entry point (hpcai.cli.main.main, which turns a Ctrl-C
at any moment, imports included, into one line and exit 130)."""

from hpcai.cli.main import main

if __name__ == "__main__":
    main()
