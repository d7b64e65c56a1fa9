"""File names that config-management tools leave in the directory they write to.

The kubelet reads every non-dot file in the manifest directory as a pod, whatever its name
(docs/kubelet-contract.md "Which files are pods"), and on relist the lexically last file of two that define
one namespace/name wins (docs/kubelet-contract.md "Duplicate names across files"). So a backup named
``kube-apiserver.yaml.<suffix>`` sorts *after* the live file and the kubelet runs the **old**
manifest; a temp file written in place is read half-written or as a second pod.

Each :class:`LeftoverPattern` below was read from the tool's source (``source``) and then seen
on this machine with the tool's real package (``seen``): an inotify watch on the directory while
the tool wrote one file. The validator (stray findings) and ``doctor``/the daemon import
:func:`identify` to say *which tool* left a stray and what to change in its configuration.

Unsafe (``kubelet_reads=True``, non-dot names in the directory):

- Ansible ``backup: yes`` (copy, template, lineinfile, blockinfile, replace, ini_file …):
  ``kube-apiserver.yaml.16532.2026-11-29@18:35:09~`` (target, PID, local time, ``~``); Ansible
  before the PID was added wrote ``kube-apiserver.yaml.2014-02-03@12:00:00~`` and, earlier,
  without seconds.
- Puppet ``file`` without ``staging_location``: its temp file
  ``kube-apiserver.yaml20261129-14192-1xi1mkg`` sits *in the directory* while ``validate_cmd``
  runs on it, so the kubelet can read a not-yet-validated manifest; ``backup => true`` (or any
  ``'.suffix'``) leaves ``kube-apiserver.yaml.puppet-bak``.
- Salt ``file.managed``: ``salt.utils.files.copyfile`` creates ``kube-apiserver.yaml<8 random>``
  (e.g. ``kube-apiserver.yamlz_wylkjp``) empty in the directory, writes it, then renames it.

- GNU ``sed -i``: ``sedXXXXXX`` (e.g. ``seddwNQmZ``), written in the directory, then renamed over
  the file.

Safe (dot-names the kubelet ignores), listed so findings can say "harmless": Ansible's
``.ansible_tmp*`` (``atomic_move`` fallback temp), Chef's ``.chef-<stem>*`` temp files.
"""

from __future__ import annotations

import re

from ..record import FrozenRecord

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Final


class LeftoverPattern(FrozenRecord):
    """One file-name shape a tool leaves beside the file it manages.

    ``tool``: ansible | puppet | salt | chef | sed. ``kind``: backup | tempfile. ``regex``: full-name
    match; group ``target`` (when present) is the managed file's name. ``kubelet_reads``: True
    for non-dot names (unsafe in the manifest directory). ``example``: a name seen here.
    ``source``: upstream file and function. ``seen``: tool version that produced ``example`` on
    this machine. ``advice``: what to configure instead.
    """

    tool: Final[str]
    kind: Final[str]
    regex: Final[re.Pattern[str]]
    kubelet_reads: Final[bool]
    example: Final[str]
    source: Final[str]
    seen: Final[str]
    advice: Final[str]

    def __init__(self, tool: str, kind: str, regex: re.Pattern[str], kubelet_reads: bool, example: str, source: str,
                 seen: str, advice: str) -> None:
        self.tool = tool
        self.kind = kind
        self.regex = regex
        self.kubelet_reads = kubelet_reads
        self.example = example
        self.source = source
        self.seen = seen
        self.advice = advice


class Leftover(FrozenRecord):
    """A directory entry recognised as a tool's leftover; ``target`` is the file it belongs to."""

    name: Final[str]
    pattern: Final[LeftoverPattern]
    target: Final[str | None]

    def __init__(self, name: str, pattern: LeftoverPattern, target: str | None) -> None:
        self.name = name
        self.pattern = pattern
        self.target = target

    def describe(self) -> str:
        """One sentence for a finding or a doctor line."""
        p = self.pattern
        of = f" of {self.target}" if self.target else ""
        return f"{p.tool} {p.kind}{of}: {p.advice}"


ANSIBLE_BACKUP = LeftoverPattern(
    tool="ansible",
    kind="backup",
    regex=re.compile(r"^(?P<target>.+?)\.(?:(?P<pid>\d+)\.)?(?P<stamp>\d{4}-\d{2}-\d{2}@\d{2}:\d{2}(?::\d{2})?)~$"),
    kubelet_reads=True,
    example="kube-apiserver.yaml.16532.2026-11-29@18:35:09~",
    source=(
        "ansible/ansible lib/ansible/module_utils/basic.py AnsibleModule.backup_local: "
        "'%s.%s.%s' % (fn, os.getpid(), time.strftime('%Y-%m-%d@%H:%M:%S~')); "
        "older releases '%s.%s' % (fn, ext) with '%Y-%m-%d@%H:%M:%S~' or '%Y-%m-%d@%H:%M~'"
    ),
    seen="ansible-core 2.19.14, copy with backup: yes",
    advice=(
        "drop 'backup: yes' for files in the manifest directory (the backup sorts after the live "
        "file, so the kubelet runs the old manifest); staticpodd keeps every version"
    ),
)

ANSIBLE_TMP = LeftoverPattern(
    tool="ansible",
    kind="tempfile",
    regex=re.compile(r"^\.ansible_tmp"),
    kubelet_reads=False,
    example=".ansible_tmpk2j3h4kube-apiserver.yaml",
    source=(
        "ansible/ansible lib/ansible/module_utils/basic.py AnsibleModule.atomic_move: "
        "tempfile.mkstemp(prefix=b'.ansible_tmp', dir=b_dest_dir, suffix=b_suffix)"
    ),
    seen="ansible-core 2.19.14 (source only: the direct rename from ~/.ansible/tmp was used here)",
    advice="harmless (a dot-name); remove it if a run was interrupted",
)

PUPPET_TEMPFILE = LeftoverPattern(
    tool="puppet",
    kind="tempfile",
    regex=re.compile(r"^(?P<target>.+)(?P<date>\d{8})-(?P<pid>\d+)-(?P<rand>[0-9a-z]+)(?:-(?P<n>\d+))?$"),
    kubelet_reads=True,
    example="kube-apiserver.yaml20261129-14192-1xi1mkg",
    source=(
        "puppetlabs/puppet lib/puppet/util.rb replace_file (Uniquefile.new(basename, dirname) unless "
        "staging_location) and lib/puppet/file_system/uniquefile.rb make_tmpname: "
        '"#{prefix}#{Time.now.strftime("%Y%m%d")}-#{$$}-#{rand(0x100000000).to_s(36)}" [+ "-#{n}"]'
    ),
    seen="puppet 7.23.0 (Debian 12), file with validate_cmd: the temp file is in the directory while "
    "validate_cmd runs on it",
    advice=(
        "set staging_location to a dot-directory on the same mount "
        "(e.g. /etc/kubernetes/manifests/.puppet-staging), or manage a copy outside the directory "
        "and run 'staticpodctl apply'"
    ),
)

PUPPET_BACKUP = LeftoverPattern(
    tool="puppet",
    kind="backup",
    regex=re.compile(r"^(?P<target>.+)\.puppet-bak$"),
    kubelet_reads=True,
    example="kube-apiserver.yaml.puppet-bak",
    source=(
        "puppetlabs/puppet lib/puppet/type/file.rb newparam(:backup): a value starting with '.' "
        "(true means '.puppet-bak') writes <file><value> beside the file"
    ),
    seen="puppet 7.23.0 (Debian 12), file with backup => '.puppet-bak'",
    advice="use backup => false (or the default filebucket 'puppet') for files in the manifest directory",
)

SALT_TEMPFILE = LeftoverPattern(
    tool="salt",
    kind="tempfile",
    regex=re.compile(r"^(?P<target>.+?\.(?:yaml|yml|json|manifest))(?P<rand>[a-z0-9_]{8})$"),
    kubelet_reads=True,
    example="kube-apiserver.yamlz_wylkjp",
    source=(
        "saltstack/salt salt/utils/files.py copyfile: mkstemp(prefix=os.path.basename(dest), "
        "dir=os.path.dirname(dest)) then shutil.copyfile and shutil.move (Python tempfile: 8 chars "
        "of [a-z0-9_])"
    ),
    seen="salt 3008.4 (PyPI), salt-call --local file.managed with contents and check_cmd",
    advice=(
        "do not let file.managed write into the manifest directory: manage a copy outside it and "
        "run 'staticpodctl apply' (cmd.run with stateful: True)"
    ),
)

SALT_TMP = LeftoverPattern(
    tool="salt",
    kind="tempfile",
    regex=re.compile(r"^__salt\.tmp\.[a-z0-9_]{8}$"),
    kubelet_reads=True,
    example="__salt.tmp.3qfps4mv",
    source="saltstack/salt salt/utils/files.py mkstemp: default prefix TEMPFILE_PREFIX = '__salt.tmp.'",
    seen="salt 3008.4 (PyPI): made in the system temp dir for check_cmd, not in the target directory",
    advice="a Salt temp file; remove it and check what wrote it into the manifest directory",
)

CHEF_TEMPFILE = LeftoverPattern(
    tool="chef",
    kind="tempfile",
    regex=re.compile(r"^\.chef-"),
    kubelet_reads=False,
    example=".chef-kube-apiserver20261129-4242-abc123.yaml",
    source=(
        "chef/chef lib/chef/file_content_management/tempfile.rb tempfile_basename: "
        "'.chef-' + basename (dot-file except on Windows), in the destination directory"
    ),
    seen="not run here (Chef is not packaged in Debian 12)",
    advice="harmless (a dot-name); remove it if a run was interrupted",
)

SED_TEMPFILE = LeftoverPattern(
    tool="sed",
    kind="tempfile",
    regex=re.compile(r"^sed[A-Za-z0-9]{6}$"),
    kubelet_reads=True,
    example="seddwNQmZ",
    source=(
        "GNU sed sed/execute.c open_next_file: ck_mkstemp(&output_file.temp_name, tmpdir, \"sed\", "
        "write_mode) in the edited file's directory, renamed over it when the file is done"
    ),
    seen="GNU sed 4.9 (Debian 12), strace of 'sed -i': openat(\"dir/seddwNQmZ\", O_CREAT|O_EXCL), rename",
    advice=(
        "sed -i writes its temp file in the manifest directory, where the kubelet may read it half "
        "written; edit a copy elsewhere and use 'staticpodctl apply' (or 'staticpodctl edit')"
    ),
)

#: Every known pattern, unsafe ones first; :func:`identify` returns the first that matches.
PATTERNS: tuple[LeftoverPattern, ...] = (
    ANSIBLE_BACKUP,
    PUPPET_BACKUP,
    SALT_TEMPFILE,
    SALT_TMP,
    SED_TEMPFILE,
    PUPPET_TEMPFILE,
    ANSIBLE_TMP,
    CHEF_TEMPFILE,
)

#: The patterns whose files the kubelet reads (non-dot names).
UNSAFE_PATTERNS: tuple[LeftoverPattern, ...] = tuple(p for p in PATTERNS if p.kubelet_reads)


def identify(name: str) -> Leftover | None:
    """The config-management leftover a directory entry's *name* is, or None.

    ``identify("kube-apiserver.yaml.16532.2026-11-29@18:35:09~")`` -> ansible backup of
    ``kube-apiserver.yaml``; ``identify("kube-apiserver.yaml")`` -> None. Name only: no I/O.
    A match means "this name has that tool's shape"; the validator still decides from the
    content whether the file runs as a pod.
    """
    for pattern in PATTERNS:
        m = pattern.regex.match(name)
        if m:
            target = m.groupdict().get("target")
            return Leftover(name=name, pattern=pattern, target=target)
    return None
