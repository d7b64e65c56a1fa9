#!/usr/bin/env bash
# Build the staticpodd RPM with rpmbuild from a clean copy of the source tree.
#
#   packaging/build-rpm.sh              # the tracked files only (`git ls-files`), as CI sees them
#   packaging/build-rpm.sh --worktree   # tracked + untracked, not ignored (work in progress)
#
# Output (.rpm) goes to packaging/out/ (git-ignored), or $OUT. On a distribution without
# pyproject-rpm-macros / systemd-rpm-macros (Debian's `rpm` package has neither), the stand-ins in
# packaging/rpm/fallback.macros are loaded, and build dependencies are not checked through the
# (empty) rpm database (--nodeps): they are Debian packages, see .ci/apt-packages.txt.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$here/packaging/out}
files=(ls-files -z)
case "${1:-}" in
  --worktree) files=(ls-files -z --cached --others --exclude-standard) ;;
  "") ;;
  *) echo "usage: $0 [--worktree]" >&2; exit 2 ;;
esac
command -v rpmbuild >/dev/null || { echo "build-rpm: rpmbuild not found (Debian: apt-get install rpm)" >&2; exit 3; }

spec=$here/packaging/rpm/staticpodd.spec
version=$(rpmspec -q --srpm --qf '%{version}' "$spec" 2>/dev/null)
work=$(mktemp -d "${TMPDIR:-/tmp}/staticpodd-rpm.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work"/{SOURCES,SPECS,BUILD,RPMS,SRPMS} "$work/src/staticpodd-$version"
git -C "$here" "${files[@]}" | (cd "$here" && xargs -0 -r sh -c \
  'for f; do [ -e "$f" ] || [ -L "$f" ] && cp -a --parents "$f" "$0"; done' "$work/src/staticpodd-$version")
tar -C "$work/src" -czf "$work/SOURCES/staticpodd-$version.tar.gz" "staticpodd-$version"

args=(--define "_topdir $work")
if [ -z "$(rpm --eval '%{?pyproject_wheel:yes}')" ] || [ -z "$(rpm --eval '%{?systemd_post:yes}')" ]; then
  echo "build-rpm: pyproject-rpm-macros/systemd-rpm-macros not installed: using packaging/rpm/fallback.macros" >&2
  args+=(--load "$here/packaging/rpm/fallback.macros" --nodeps)
fi
# The system interpreter, whatever else (pyenv, a virtualenv) is first on PATH.
PATH=/usr/sbin:/usr/bin:/sbin:/bin rpmbuild -bb "${args[@]}" "$spec"

mkdir -p "$out"
for f in "$work"/RPMS/*/*.rpm; do
  cp "$f" "$out/"
  echo "built: $out/${f##*/}"
done
