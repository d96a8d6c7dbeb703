# Sourced by fixture build scripts: download pinned .deb files from another Debian suite
# (forky's containerd for the node, trixie's python3.13 for Harbor) without touching the system's
# apt sources, lists or dpkg database: a private sources file and lists dir under a scratch folder,
# `apt-get download` only (nothing is installed), the archive key Debian already ships.
#
#   debian_suite_download SUITE APT_DIR PACKAGE=VERSION...
#
# leaves the .deb files in APT_DIR/archives; APT_DIR is created afresh. The caller unpacks them
# with `dpkg-deb -x` and removes APT_DIR (the suite's index, ~100 MB unpacked, is only needed here).
debian_suite_download() {
  local suite=$1 apt_dir=$2; shift 2
  rm -rf "$apt_dir"; mkdir -p "$apt_dir"/{lists/partial,archives/partial,sources}
  cat > "$apt_dir/sources/$suite.sources" <<EOS
Types: deb
URIs: http://deb.debian.org/debian
Suites: $suite
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOS
  local apt_opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$apt_dir/sources"
    -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache::Archives=$apt_dir/archives"
    -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= -o APT::Architecture=amd64)
  apt-get "${apt_opts[@]}" update -qq &&
    (cd "$apt_dir/archives" && apt-get "${apt_opts[@]}" download "$@" 2>&1 | grep -v 'unsandboxed as root' >&2; exit "${PIPESTATUS[0]}")
}
