"""The staticpodd.node collection as Ansible tooling sees it: ``ansible-galaxy collection build``,
``ansible-doc`` on the installed collection, and ``ansible-test sanity`` (every sanity test that runs
without containers or remote hosts) with the venv's own Python.

ansible-test puts each sanity test's requirements (its own pinned versions, from PyPI) in a venv
under ``~/.ansible/test/venv``; the tests point HOME at ``<ansible venv>/home`` so those venvs are
made once and kept beside the ansible-core venv, never in the user's home. Its pip bootstrap
script cannot be downloaded here (ci-files.testing.ansible.com is out of reach), so the cache entry
ansible-test looks for first is filled with tests/cm/ansible_test/get_pip.py.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tarfile

import yaml
from collection_harness import COLLECTION_SRC, REPO, copy_collection_for_ansible_test

MODULES = ("staticpod_manifest", "staticpod_park", "staticpod_info")
#: the sanity tests that must have run (not only "passed because nothing applied")
MUST_RUN = ("ansible-doc", "compile", "import", "pep8", "pylint", "validate-modules", "yamllint",
            "runtime-metadata", "no-smart-quotes", "shebang")


def test_the_collection_builds_into_a_tarball_with_its_modules_docs_and_playbook(collection):
    tarball, _ = collection
    galaxy = yaml.safe_load((COLLECTION_SRC / "galaxy.yml").read_text())
    with tarfile.open(tarball) as tf:
        names = set(tf.getnames())
        manifest = json.load(tf.extractfile("MANIFEST.json"))
    info = manifest["collection_info"]
    assert (info["namespace"], info["name"], info["version"]) == ("staticpodd", "node", galaxy["version"])
    for m in MODULES:
        assert f"plugins/modules/{m}.py" in names
    for f in ("plugins/module_utils/staticpodctl.py", "plugins/doc_fragments/staticpodctl.py", "meta/runtime.yml",
              "playbooks/rolling_drill.yml", "README.md", "docs/rolling_drill.md"):
        assert f in names, f


def test_ansible_doc_renders_every_module_with_the_shared_options(ansible_venv, fleet):
    listed = subprocess.run([str(ansible_venv / "ansible-doc"), "-l", "staticpodd.node"], env=fleet.env,
                            capture_output=True, text=True, check=True).stdout
    for m in MODULES:
        assert f"staticpodd.node.{m}" in listed
        text = subprocess.run([str(ansible_venv / "ansible-doc"), f"staticpodd.node.{m}"], env=fleet.env,
                              capture_output=True, text=True, check=False)
        assert text.returncode == 0 and "EXAMPLES" in text.stdout and "RETURN VALUES" in text.stdout, text.stderr
        raw = subprocess.run([str(ansible_venv / "ansible-doc"), "--json", f"staticpodd.node.{m}"], env=fleet.env,
                             capture_output=True, text=True, check=True).stdout
        doc = json.loads(raw)[f"staticpodd.node.{m}"]["doc"]
        assert {"root", "staticpodctl_path", "manifest_dir"} <= set(doc["options"]), m  # the doc fragment
    park = json.loads(subprocess.run([str(ansible_venv / "ansible-doc"), "--json", "staticpodd.node.staticpod_park"],
                                     env=fleet.env, capture_output=True, text=True, check=True).stdout)
    options = park["staticpodd.node.staticpod_park"]["doc"]["options"]
    assert {"for", "until", "force", "wait", "wait_timeout", "crictl", "node_name"} <= set(options)


def _seed_pip_bootstrap(home, ansible_venv) -> None:
    """Put tests/cm/ansible_test/get_pip.py where ansible-test looks for its pip bootstrap script."""
    src = next((ansible_venv.parent / "lib").glob("python3*/site-packages/ansible_test/_internal/python_requirements.py"))
    version = re.search(r"default_packages = dict\(\s*pip='([0-9.]+)'", src.read_text()).group(1)
    cache = home / ".ansible" / "test" / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(REPO / "tests" / "cm" / "ansible_test" / "get_pip.py",
                    cache / f"get_pip_{version.replace('.', '_')}.py")


def test_ansible_test_sanity_passes_on_the_collection(ansible_venv, tmp_path, fleet):
    target = copy_collection_for_ansible_test(tmp_path)
    home = ansible_venv.parent / "home"
    _seed_pip_bootstrap(home, ansible_venv)
    python = subprocess.run([str(ansible_venv / "python"), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                            capture_output=True, text=True, check=True).stdout.strip()
    env = dict(fleet.env, HOME=str(home))
    proc = subprocess.run([str(ansible_venv / "ansible-test"), "sanity", "--python", python, "--color", "no"],
                          cwd=target, env=env, capture_output=True, text=True, timeout=1200, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    ran = set(re.findall(r'Running sanity test "([a-z0-9-]+)"', out))
    assert set(MUST_RUN) <= ran, (sorted(ran), out[-3000:])
