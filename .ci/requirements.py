#!/usr/bin/env python3
"""The requirements pyproject.toml declares (dependencies and the test and train extras), one per line, for
`pip install --upgrade -r`: CI installs the newest release each range allows, as a newcomer's pip does.

    python3 .ci/requirements.py [--with-torch] > reqs.txt

torch is left out unless --with-torch: a machine keeps the torch it has (README's set-up), and CI installs
the CPU build from its disk first (.ci/run); .ci/newest upgrades it where torch's CPU index answers.
"""

import sys

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

with open("pyproject.toml", "rb") as fh:
    project = tomllib.load(fh)["project"]
reqs = [*project["dependencies"], *project["optional-dependencies"]["test"],
        *project["optional-dependencies"]["train"]]
keep_torch = "--with-torch" in sys.argv[1:]
for r in sorted(set(reqs)):
    if keep_torch or not r.replace(" ", "").startswith("torch"):
        print(r)
