#!/usr/bin/env bash
# Builds the node fixture's two images as OCI image archives (no registry, no Docker engine) into
# $NODE_DIR/images, for `ctr -n k8s.io images import`:
#   busybox.oci.tar          localhost/arl-node/busybox:fixture: busybox-static and its applet
#                            links; the pod sandbox ("pause") image and the test client
#   sandbox-runtime.oci.tar  localhost/arl-node/sandbox-runtime:fixture: Debian bookworm minbase
#                            + python3 (debootstrap), laid out by the project's own
#                            python/image/install-layout.sh with the runtime and forwarder, and the
#                            user, env, workdir and command of python/Dockerfile. The base is not
#                            OpenEnv's opencode sandbox image (no registry here): its opencode is a
#                            stand-in script, named as such.
#   coredns.oci.tar          localhost/arl-node/coredns:fixture: bin/coredns (build.sh) alone, as
#                            CoreDNS's own image lays it out
# Usage: images.sh [busybox] [coredns] [sandbox-runtime]   (default: both; each is rebuilt only when its stamp changed)
# Each archive has one uncompressed layer (a tar of the rootfs), a config, a manifest and an
# index whose io.containerd.image.name annotation names the image. Prints each step's wall time.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
[[ $EUID == 0 ]] || { log "ERROR: run as root (debootstrap)"; exit 1; }
out="$NODE_DIR/images"
build="$NODE_DIR/build"
mkdir -p "$out" "$build" "$NODE_DIR/debs"
sha() { sha256sum "$1" | cut -d' ' -f1; }

# oci_archive ROOTFS OUT NAME CONFIG_JSON  (CONFIG_JSON: the image config's "config" object)
oci_archive() {
  local rootfs=$1 dest=$2 name=$3 cfg=$4 d ld ls cd cs md ms
  d="$(mktemp -d "$build/oci.XXXXXX")"
  mkdir -p "$d/blobs/sha256"
  tar --numeric-owner --sort=name --xattrs -C "$rootfs" -cf "$d/layer.tar" .
  ld=$(sha "$d/layer.tar"); ls=$(stat -c %s "$d/layer.tar"); mv "$d/layer.tar" "$d/blobs/sha256/$ld"
  printf '{"architecture":"amd64","os":"linux","config":%s,"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
    "$cfg" "$ld" > "$d/config.json"
  cd=$(sha "$d/config.json"); cs=$(stat -c %s "$d/config.json"); mv "$d/config.json" "$d/blobs/sha256/$cd"
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
    "$cd" "$cs" "$ld" "$ls" > "$d/manifest.json"
  md=$(sha "$d/manifest.json"); ms=$(stat -c %s "$d/manifest.json"); mv "$d/manifest.json" "$d/blobs/sha256/$md"
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"amd64","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
    "$md" "$ms" "$name" "${name##*:}" > "$d/index.json"
  printf '{"imageLayoutVersion":"1.0.0"}' > "$d/oci-layout"
  tar -C "$d" -cf "$dest.new" oci-layout index.json blobs
  mv "$dest.new" "$dest"; rm -rf "$d"
}

what=("$@"); (( ${#what[@]} > 0 )) || what=(busybox coredns sandbox-runtime)
want() { [[ " ${what[*]} " == *" $1 "* ]]; }

# --- busybox (pause + client) ----------------------------------------------------------------
bb_stamp="busybox=$(dpkg-query -W -f='${Version}' busybox-static)"
if want busybox && [[ "${FORCE:-0}" == 1 || "$(cat "$out/busybox.stamp" 2>/dev/null)" != "$bb_stamp" || ! -f "$out/busybox.oci.tar" ]]; then
  t0=$(date +%s.%N)
  r="$build/busybox-rootfs"; rm -rf "$r"; mkdir -p "$r"/{bin,etc,proc,sys,dev,tmp}
  cp /bin/busybox "$r/bin/busybox"
  for a in $("$r/bin/busybox" --list); do [[ "$a" == busybox ]] || ln -s busybox "$r/bin/$a"; done
  printf 'root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' > "$r/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\n' > "$r/etc/group"
  chmod 1777 "$r/tmp"
  oci_archive "$r" "$out/busybox.oci.tar" "$BUSYBOX_IMAGE" \
    '{"Cmd":["/bin/sleep","2147483647"],"Env":["PATH=/bin"],"WorkingDir":"/"}'
  printf '%s' "$bb_stamp" > "$out/busybox.stamp"; rm -rf "$r"
  log "busybox image built in $(secs "$t0")s ($(du -h "$out/busybox.oci.tar" | cut -f1))"
fi

# --- CoreDNS (cluster DNS) ---------------------------------------------------------------------
# The static binary build.sh made (bin/coredns), laid out as CoreDNS's own image is (its Dockerfile,
# CoreDNS v1.14.7: the binary at /coredns, the entrypoint, user nonroot 65532, port 53).
cd_stamp="coredns=$(sha "$NODE_DIR/bin/coredns" | cut -c1-16)"
if want coredns && [[ "${FORCE:-0}" == 1 || "$(cat "$out/coredns.stamp" 2>/dev/null)" != "$cd_stamp" || ! -f "$out/coredns.oci.tar" ]]; then
  t0=$(date +%s.%N)
  r="$build/coredns-rootfs"; rm -rf "$r"; mkdir -p "$r"/{etc,tmp}
  install -m 0755 "$NODE_DIR/bin/coredns" "$r/coredns"
  printf 'root:x:0:0:root:/:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/:/sbin/nologin\n' > "$r/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' > "$r/etc/group"
  chmod 1777 "$r/tmp"
  oci_archive "$r" "$out/coredns.oci.tar" "$COREDNS_IMAGE" \
    '{"User":"65532:65532","Entrypoint":["/coredns"],"ExposedPorts":{"53/tcp":{},"53/udp":{}},"WorkingDir":"/"}'
  printf '%s' "$cd_stamp" > "$out/coredns.stamp"; rm -rf "$r"
  log "coredns image built in $(secs "$t0")s ($(du -h "$out/coredns.oci.tar" | cut -f1))"
fi

# --- sandbox runtime ---------------------------------------------------------------------------
src_hash=$(cat "$REPO_ROOT/python/agent_rl_sandbox/runtime.py" "$REPO_ROOT/python/agent_rl_sandbox/forwarder.py" \
  "$REPO_ROOT/python/image/install-layout.sh" "$0" | sha256sum | cut -c1-16)
rt_stamp="bookworm-minbase+python3 src=$src_hash"
if want sandbox-runtime && [[ "${FORCE:-0}" == 1 || "$(cat "$out/sandbox-runtime.stamp" 2>/dev/null)" != "$rt_stamp" || ! -f "$out/sandbox-runtime.oci.tar" ]]; then
  r="$build/runtime-rootfs"; rm -rf "$r"
  t0=$(date +%s.%N)
  debootstrap --variant=minbase --include=python3 --cache-dir="$NODE_DIR/debs" bookworm "$r" http://deb.debian.org/debian \
    > "$build/debootstrap.log" 2>&1 || { tail -20 "$build/debootstrap.log" >&2; log "ERROR: debootstrap failed (log: $build/debootstrap.log)"; exit 1; }
  log "debootstrap bookworm minbase + python3 in $(secs "$t0")s"
  t0=$(date +%s.%N)
  rm -rf "$r"/usr/share/doc/* "$r"/usr/share/man/* "$r"/usr/share/info/* "$r"/var/cache/apt/*.bin "$r"/var/lib/apt/lists/* "$r"/var/log/*.log
  find "$r/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name 'locale.alias' -exec rm -rf {} + 2>/dev/null || true
  # The stock OpenEnv image's HOME, as install-layout.sh expects it; its opencode is a stand-in.
  stock="$build/stock-home"; rm -rf "$stock"; mkdir -p "$stock/.opencode/bin"
  printf '#!/bin/sh\necho "opencode stand-in (node fixture image: not the OpenEnv opencode sandbox base)"\n' > "$stock/.opencode/bin/opencode"
  chmod 755 "$stock/.opencode/bin/opencode"
  sh "$REPO_ROOT/python/image/install-layout.sh" "$stock" "$REPO_ROOT/python/agent_rl_sandbox/runtime.py" \
    "$REPO_ROOT/python/agent_rl_sandbox/forwarder.py" "$r"
  mkdir -p "$r/workspace"; rm -rf "$stock"
  # python/Dockerfile's own checks, run in the rootfs.
  chroot "$r" sh -c 'command -v bash python3 >/dev/null && python3 -I /opt/agent-rl/runtime.py --help >/dev/null && python3 -I /opt/agent-rl/forwarder.py --help >/dev/null'
  oci_archive "$r" "$out/sandbox-runtime.oci.tar" "$RUNTIME_IMAGE" \
    '{"User":"65532:65532","Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","HOME=/root","SANDBOX_HOME_SEED=/opt/agent-rl/home"],"WorkingDir":"/workspace","ExposedPorts":{"8888/tcp":{}},"Cmd":["python3","-I","/opt/agent-rl/runtime.py","--port","8888","--home-seed","/opt/agent-rl/home"]}'
  printf '%s' "$rt_stamp" > "$out/sandbox-runtime.stamp"; rm -rf "$r"
  log "sandbox-runtime image laid out and archived in $(secs "$t0")s ($(du -h "$out/sandbox-runtime.oci.tar" | cut -f1))"
fi
ls -la "$out" >&2
