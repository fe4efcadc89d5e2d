"""Stand-in for the get-pip bootstrap script that ansible-test downloads from ci-files.testing.ansible.com,
which our machines cannot reach. tests/sanity/run copies it to ansible-test's cache as get_pip_<version>.py
and puts the pip wheel of that version, downloaded from PyPI, next to it.

ansible-test runs it with the Python of an empty virtual environment (no pip) and get-pip's arguments:
  [--disable-pip-version-check] pip==<version> [--no-setuptools] [--no-wheel]
Like get-pip, it installs the named packages (plus setuptools and wheel unless told not to) with the pip of the
wheel on sys.path; when only pip is wanted, it installs it from the wheel alone (--no-index).
"""

import glob
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
args = sys.argv[1:]
requested = [arg for arg in args if not arg.startswith("-")]
pins = [arg.split("==", 1)[1] for arg in requested if arg.startswith("pip==")]
wheels = glob.glob(os.path.join(here, "pip-%s-py3-none-any.whl" % (pins[0] if pins else "*")))
if not wheels:
    sys.exit("get_pip stand-in: no pip wheel %s in %s; tests/sanity/run downloads it (pip download pip==<version>)"
             % (pins[0] if pins else "", here))
sys.path.insert(0, sorted(wheels)[-1])

extra = [name for name, flag in (("setuptools", "--no-setuptools"), ("wheel", "--no-wheel")) if flag not in args]
options = [arg for arg in args if arg not in ("--no-setuptools", "--no-wheel")]
source = [] if extra else ["--no-index", "--find-links", here]

from pip._internal.cli.main import main  # noqa: E402 (pip comes from the wheel put on sys.path above)

sys.exit(main(["install", "--upgrade", "--force-reinstall"] + source + options + extra))
