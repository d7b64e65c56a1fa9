#!/usr/bin/env bash
# Build the staticpodd .deb from a clean copy of the source tree.
#
#   packaging/build-deb.sh              # the tracked files only (`git ls-files`), as CI sees them
#   packaging/build-deb.sh --worktree   # tracked + untracked, not ignored (work in progress)
#
# dpkg-buildpackage needs debian/ at the source root: the copy gets packaging/debian as debian/.
# Output (.deb, .buildinfo, .changes) goes to packaging/out/ (git-ignored), or $OUT.
# Build dependencies: see packaging/debian/control (dpkg-checkbuilddeps names what is missing).
# DEB_VERSION=0.1.0+test1 builds the same tree as that (newer) package version, with a changelog
# entry saying so: the upgrade tests install one .deb over the other.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$here/packaging/out}
files=(ls-files -z)
case "${1:-}" in
  --worktree) files=(ls-files -z --cached --others --exclude-standard) ;;
  "") ;;
  *) echo "usage: $0 [--worktree]" >&2; exit 2 ;;
esac

version=$(dpkg-parsechangelog -l "$here/packaging/debian/changelog" -S Version)
work=$(mktemp -d "${TMPDIR:-/tmp}/staticpodd-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT
src=$work/staticpodd-$version
mkdir "$src"
# Copy the listed files that exist (a tracked file deleted in the work tree is skipped).
git -C "$here" "${files[@]}" | (cd "$here" && xargs -0 -r sh -c \
  'for f; do [ -e "$f" ] || [ -L "$f" ] && cp -a --parents "$f" "$0"; done' "$src")
rm -rf "$src/debian"
cp -a "$here/packaging/debian" "$src/debian"
if [ -n "${DEB_VERSION:-}" ]; then
  { echo "staticpodd ($DEB_VERSION) unstable; urgency=medium"; echo
    echo "  * Rebuilt as $DEB_VERSION (packaging/build-deb.sh DEB_VERSION=) for upgrade tests."; echo
    echo " -- staticpodd tests <root@localhost>  $(date -R)"; echo
    cat "$here/packaging/debian/changelog"; } >"$src/debian/changelog"
fi

# Debian's own interpreter and tools, whatever else (pyenv, a virtualenv) is first on PATH.
(cd "$src" && PATH=/usr/sbin:/usr/bin:/sbin:/bin dpkg-buildpackage -b -us -uc)

mkdir -p "$out"
for f in "$work"/*.deb "$work"/*.buildinfo "$work"/*.changes; do
  cp "$f" "$out/"
  echo "built: $out/${f##*/}"
done
