"""``python -m convt``: the same as the ``convt`` command."""

from convt.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
