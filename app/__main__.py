"""`python -m app` runs the ling-chat command line."""

from app.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
