"""Where the tests find the repository, the tests folder and their fixtures, wherever a test file sits."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
DATA = TESTS / "data"
