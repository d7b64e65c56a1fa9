"""Stand-in for ansible-test's pip bootstrap script (``get-pip-<version>.py``).

ansible-test creates an empty virtualenv per sanity test and downloads get-pip.py from
ci-files.testing.ansible.com to put pip in it; this machine (and CI) reach PyPI only. ansible-test
uses a file it finds at ``~/.ansible/test/cache/get_pip_<version>.py`` instead of downloading it,
so the tests put this one there: it installs the stdlib's bundled pip (ensurepip), then, with that
pip, exactly the packages ansible-test asked for (``pip==24.2``) from PyPI. The sanity
requirements ansible-test then installs are its own pinned ones, unchanged.
"""

import subprocess
import sys

if __name__ == "__main__":
    # get-pip.py's own options; pip install does not know them (setuptools/wheel are not wanted anyway)
    args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
    # in a process of its own: ensurepip sets PIP_CONFIG_FILE=/dev/null in its environment, which
    # would hide the site's pip.conf (its CA certificates, its mirror) from the install below
    subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade"])
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", *args])
