#!/usr/bin/env bash
# Builds the node fixture's images as OCI image archives (no registry, no Docker engine) into
# $NODE_DIR/images, for `ctr -n k8s.io images import`:
#   busybox.oci.tar          localhost/arl-node/busybox:fixture: busybox-static and its applet
#                            links; the pod sandbox ("pause") image and the test client
#   sandbox-runtime.oci.tar  localhost/arl-node/sandbox-runtime:fixture: Debian bookworm minbase
#                            + python3 (debootstrap), laid out by the project's own
#                            python/image/install-layout.sh with the runtime and forwarder, the
#                            per-rollout key verifier at /opt/agent-rl/rollout_keys.py (as
#                            python/Dockerfile installs it: the ingress's rollout-keys Deployment runs
#                            it from the pool's sandbox image), and the user, env, workdir and
#                            command of python/Dockerfile. The base is not
#                            OpenEnv's opencode sandbox image (no registry here): its opencode is a
#                            stand-in script, named as such.
#   nginx.oci.tar            localhost/arl-node/nginx:fixture: a STAND-IN for the stack's
#                            images.nginx (nginxinc/nginx-unprivileged:1.27-alpine): Debian
#                            $NGINX_SUITE minbase + Debian's nginx (>= 1.27.3, which the env router's
#                            `server ... resolve` needs), made unprivileged the way that image is
#                            (nginxinc/docker-nginx-unprivileged mainline/alpine/Dockerfile): user and
#                            group nginx 101, no `user` directive, pid and temp paths under /tmp,
#                            listen 8080, logs to stdout/stderr, USER 101, STOPSIGNAL SIGQUIT,
#                            CMD nginx -g 'daemon off;'. Debian's build, not nginx.org's Alpine one.
#   openenv-echo.oci.tar     localhost/arl-node/openenv-echo:fixture: a real OpenEnv server, the echo
#                            env that openenv $OPENENV_VERSION's own `openenv init` writes from the
#                            template in the PyPI package (openenv/cli/templates/openenv_env), laid
#                            out as that template's server/Dockerfile does (venv /app/.venv, env
#                            /app/env, PATH and PYTHONPATH, CMD `cd /app/env && uvicorn server.app:app
#                            --host 0.0.0.0 --port 8000`, the catalog's uvicorn-cli form), on Debian
#                            bookworm minbase + python3 (also the env router's capacity responder's
#                            python3). Packages from PyPI at python/requirements-test.txt's pins;
#                            OpenAI's client (openai) too: the image is also the tests' Python client.
#   coredns.oci.tar          localhost/arl-node/coredns:fixture: bin/coredns (build.sh) alone, as
#                            CoreDNS's own image lays it out (the binary at /coredns, the
#                            entrypoint, user nonroot 65532)
#   trainer-standin.oci.tar  localhost/arl-node/trainer-standin:fixture: a STAND-IN for the stack's
#                            images.trainer (black box): see build_trainer_standin below
# Usage: images.sh [busybox] [coredns] [sandbox-runtime] [nginx] [openenv-echo] [trainer-standin]   (default: all; each is
# rebuilt only when its stamp changed)
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

what=("$@"); (( ${#what[@]} > 0 )) || what=(busybox coredns sandbox-runtime nginx openenv-echo trainer-standin)
# One images.sh at a time per output directory: `npm test` starts the images that need no Go
# program beside the Go builds (scripts/test/run.ts), and build.sh's own call then waits here.
exec 8>"$NODE_DIR/.images.lock"
flock 8
want() { [[ " ${what[*]} " == *" $1 "* ]]; }
# stale NAME STAMP: the image is wanted and its archive is missing or was built from other inputs.
stale() { want "$1" && [[ "${FORCE:-0}" == 1 || "$(cat "$out/$1.stamp" 2>/dev/null)" != "$2" || ! -f "$out/$1.oci.tar" ]]; }
# The stamp's hash of the shell functions that build an image (not the whole file: editing one
# image's steps rebuilds that image only).
fn_hash() { declare -f oci_archive strip_rootfs chroot_proc debootstrap_minbase "$@" | sha256sum | cut -c1-16; }
# strip_rootfs ROOTFS: docs, man pages, locales, apt lists and logs out (the images run, never install).
strip_rootfs() {
  local r=$1
  rm -rf "$r"/usr/share/doc/* "$r"/usr/share/man/* "$r"/usr/share/info/* "$r"/var/cache/apt/*.bin "$r"/var/lib/apt/lists/* "$r"/var/log/*.log
  find "$r/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name 'locale.alias' -exec rm -rf {} + 2>/dev/null || true
}
# chroot_proc ROOTFS CHROOT_ARGS...: `chroot CHROOT_ARGS...` with ROOTFS/proc mounted, in a private
# mount namespace of its own (the mount goes with the process: nothing to unmount, also on failure).
chroot_proc() {
  unshare --mount --propagation private sh -c 'r=$1; shift; mount -t proc proc "$r/proc" && exec chroot "$@"' chroot_proc "$@"
}
# debootstrap_minbase ROOTFS SUITE INCLUDE [SCRIPT]: Debian minbase from deb.debian.org, debs cached
# in $NODE_DIR/debs; on failure the log's tail.
debootstrap_minbase() {
  local r=$1 suite=$2 include=$3 script=${4:-} log
  log="$build/debootstrap-$suite-${include//,/+}.log"
  rm -rf "$r"
  debootstrap --variant=minbase --include="$include" --cache-dir="$NODE_DIR/debs" "$suite" "$r" http://deb.debian.org/debian $script \
    > "$log" 2>&1 || { tail -20 "$log" >&2; log "ERROR: debootstrap $suite ($include) failed (log: $log)"; exit 1; }
}
# cached_minbase ROOTFS SUITE INCLUDE: as debootstrap_minbase, the result kept as a tar in
# $NODE_DIR/rootfs/ and unpacked from there the next time (the OpenEnv and trainer images share
# bookworm + python3, python3-venv: one debootstrap, about two minutes of CPU, not two).
cached_minbase() {
  # Keyed by suite, packages and debootstrap_minbase's own steps (a change to them makes a new base).
  local r=$1 suite=$2 include=$3 base
  base="$NODE_DIR/rootfs/$2-${3//,/+}-$(declare -f debootstrap_minbase | sha256sum | cut -c1-12).tar"
  if [[ "${FORCE:-0}" != 1 && -f "$base" ]]; then
    rm -rf "$r"; mkdir -p "$r"; tar --numeric-owner --xattrs -C "$r" -xpf "$base"; return
  fi
  debootstrap_minbase "$r" "$suite" "$include"
  mkdir -p "$NODE_DIR/rootfs"
  tar --numeric-owner --xattrs -C "$r" -cf "$base.new" . && mv "$base.new" "$base"
}

# pip_chroot ROOTFS LOG SCRIPT: runs SCRIPT (sh -eu) in ROOTFS with pip set up to reach PyPI as this
# machine does: the lock as /tmp/constraints.txt, this machine's CA bundle as PIP_CERT (a
# TLS-intercepting proxy's CA included; the rootfs has no ca-certificates of its own), its proxy and
# index settings, and pip's cache ($NODE_DIR/pip-cache, moved in for the run and back out after).
# SCRIPT removes /tmp/constraints.txt and /tmp/ca-certificates.crt itself; its output goes to LOG.
pip_chroot() {
  local r=$1 out=$2 script=$3 pip_cache="$NODE_DIR/pip-cache" pass=() v code=0
  cp "$REPO_ROOT/python/requirements-test.txt" "$r/tmp/constraints.txt"
  [[ -f /etc/ssl/certs/ca-certificates.crt ]] || { log "ERROR: /etc/ssl/certs/ca-certificates.crt is missing (apt-get install ca-certificates): pip needs it to reach PyPI"; exit 1; }
  cp /etc/ssl/certs/ca-certificates.crt "$r/tmp/ca-certificates.crt"
  for v in PIP_INDEX_URL PIP_EXTRA_INDEX_URL HTTPS_PROXY HTTP_PROXY NO_PROXY https_proxy http_proxy no_proxy; do
    [[ -n "${!v:-}" ]] && pass+=("$v=${!v}")
  done
  mkdir -p "$pip_cache"; rm -rf "$r/tmp/pip-cache"; mv "$pip_cache" "$r/tmp/pip-cache"
  chroot_proc "$r" "$r" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root PIP_CACHE_DIR=/tmp/pip-cache PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_CERT=/tmp/ca-certificates.crt "${pass[@]}" sh -euc "$script" > "$out" 2>&1 || code=$?
  mv "$r/tmp/pip-cache" "$pip_cache"
  return "$code"
}

# --- busybox (pause + client) ----------------------------------------------------------------
bb_stamp="busybox=$(dpkg-query -W -f='${Version}' busybox-static)"
if stale busybox "$bb_stamp"; then
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
build_coredns_image() {
  local r="$build/coredns-rootfs" t0
  t0=$(date +%s.%N)
  rm -rf "$r"; mkdir -p "$r"/{etc,tmp}
  install -m 0755 "$NODE_DIR/bin/coredns" "$r/coredns"
  printf 'root:x:0:0:root:/:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/:/sbin/nologin\n' > "$r/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' > "$r/etc/group"
  chmod 1777 "$r/tmp"
  oci_archive "$r" "$out/coredns.oci.tar" "$COREDNS_IMAGE" \
    '{"User":"65532:65532","Entrypoint":["/coredns"],"ExposedPorts":{"53/tcp":{},"53/udp":{}},"WorkingDir":"/"}'
  rm -rf "$r"
  log "coredns image built in $(secs "$t0")s ($(du -h "$out/coredns.oci.tar" | cut -f1))"
}
if want coredns; then
  [[ -f "$NODE_DIR/bin/coredns" ]] || { log "ERROR: $NODE_DIR/bin/coredns missing (build.sh builds it before the images)"; exit 1; }
  cd_stamp="coredns=$(sha "$NODE_DIR/bin/coredns" | cut -c1-16) fn=$(fn_hash build_coredns_image)"
  if stale coredns "$cd_stamp"; then build_coredns_image; printf '%s' "$cd_stamp" > "$out/coredns.stamp"; fi
fi

# --- sandbox runtime ---------------------------------------------------------------------------
build_sandbox_runtime() {
  local r="$build/runtime-rootfs" t0 stock
  t0=$(date +%s.%N)
  debootstrap_minbase "$r" bookworm python3
  log "debootstrap bookworm minbase + python3 in $(secs "$t0")s"
  t0=$(date +%s.%N)
  strip_rootfs "$r"
  # The stock OpenEnv image's HOME, as install-layout.sh expects it; its opencode is a stand-in.
  stock="$build/stock-home"; rm -rf "$stock"; mkdir -p "$stock/.opencode/bin"
  printf '#!/bin/sh\necho "opencode stand-in (node fixture image: not the OpenEnv opencode sandbox base)"\n' > "$stock/.opencode/bin/opencode"
  chmod 755 "$stock/.opencode/bin/opencode"
  sh "$REPO_ROOT/python/image/install-layout.sh" "$stock" "$REPO_ROOT/python/agent_rl_sandbox/runtime.py" \
    "$REPO_ROOT/python/agent_rl_sandbox/forwarder.py" "$r"
  install -m 0444 "$REPO_ROOT/python/agent_rl_sandbox/rollout_keys.py" "$r/opt/agent-rl/rollout_keys.py"
  mkdir -p "$r/workspace"; rm -rf "$stock"
  # python/Dockerfile's own checks, run in the rootfs.
  chroot "$r" sh -c 'command -v bash python3 >/dev/null && python3 -I /opt/agent-rl/runtime.py --help >/dev/null && python3 -I /opt/agent-rl/forwarder.py --help >/dev/null && python3 -I /opt/agent-rl/rollout_keys.py --help >/dev/null'
  oci_archive "$r" "$out/sandbox-runtime.oci.tar" "$RUNTIME_IMAGE" \
    '{"User":"65532:65532","Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","HOME=/root","SANDBOX_HOME_SEED=/opt/agent-rl/home"],"WorkingDir":"/workspace","ExposedPorts":{"8888/tcp":{}},"Cmd":["python3","-I","/opt/agent-rl/runtime.py","--port","8888","--home-seed","/opt/agent-rl/home"]}'
  rm -rf "$r"
  log "sandbox-runtime image laid out and archived in $(secs "$t0")s ($(du -h "$out/sandbox-runtime.oci.tar" | cut -f1))"
}
rt_stamp="bookworm-minbase+python3 src=$(cat "$REPO_ROOT/python/agent_rl_sandbox/runtime.py" "$REPO_ROOT/python/agent_rl_sandbox/forwarder.py" \
  "$REPO_ROOT/python/agent_rl_sandbox/rollout_keys.py" "$REPO_ROOT/python/image/install-layout.sh" | sha256sum | cut -c1-16) fn=$(fn_hash build_sandbox_runtime)"
if stale sandbox-runtime "$rt_stamp"; then build_sandbox_runtime; printf '%s' "$rt_stamp" > "$out/sandbox-runtime.stamp"; fi

# --- nginx (stand-in for nginxinc/nginx-unprivileged) -------------------------------------------
# Debian's nginx build, not nginx.org's: its compiled-in modules are Debian's (nginx -V), and it has
# no dynamic module installed. The stack's rendered configs load none: the ingress's
# (components/ingress/nginx.ts) and the env router's (components/env/router.ts) use core http
# modules only (proxy, upstream zone/least_conn/keepalive, map, limit_req, return, stub_status,
# ssl for the ingress's TLS).
NGINX_MIN_VERSION=1.27.3    # components/env/router.ts NGINX_MIN_VERSION_FOR_RESOLVE
build_nginx() {
  local r="$build/nginx-rootfs" t0 v
  t0=$(date +%s.%N)
  # debootstrap 1.0.128 has no forky script: sid's serves every suite after bookworm.
  debootstrap_minbase "$r" "$NGINX_SUITE" nginx /usr/share/debootstrap/scripts/sid
  log "debootstrap $NGINX_SUITE minbase + nginx in $(secs "$t0")s"
  t0=$(date +%s.%N)
  strip_rootfs "$r"
  v=$(chroot "$r" nginx -v 2>&1 | sed -n 's|^nginx version: nginx/\([0-9.]*\).*|\1|p')
  [[ -n "$v" && "$(printf '%s\n%s\n' "$NGINX_MIN_VERSION" "$v" | sort -V | head -1)" == "$NGINX_MIN_VERSION" ]] ||
    { log "ERROR: Debian $NGINX_SUITE's nginx is '${v:-unknown}', the env router needs >= $NGINX_MIN_VERSION"; exit 1; }
  # The unprivileged image's user: nginx, uid and gid 101 (what the stack's pods run as:
  # components/ingress/model.ts runAsUser, components/env/model.ts ROUTER_UID).
  if chroot "$r" getent passwd 101 >/dev/null || chroot "$r" getent group 101 >/dev/null; then
    log "ERROR: uid or gid 101 is taken in the $NGINX_SUITE rootfs: $(chroot "$r" getent passwd 101; chroot "$r" getent group 101)"; exit 1
  fi
  chroot "$r" groupadd --system --gid 101 nginx
  chroot "$r" useradd --system --uid 101 --gid 101 --no-create-home --home-dir /var/cache/nginx --shell /usr/sbin/nologin nginx
  # Its config, as that image has it (not Debian's: `user www-data`, /run/nginx.pid, port 80).
  rm -rf "$r"/etc/nginx/sites-available "$r"/etc/nginx/sites-enabled "$r"/etc/nginx/modules-enabled "$r"/var/www
  mkdir -p "$r"/etc/nginx/conf.d "$r"/usr/share/nginx/html "$r"/var/cache/nginx
  cat > "$r/etc/nginx/nginx.conf" <<'EOC'
# localhost/arl-node/nginx:fixture (test/node/images.sh): a stand-in for
# nginxinc/nginx-unprivileged, unprivileged the same way: no `user` directive, pid and temp files
# under /tmp, listen 8080. The stack's pods run their own config (-c) on a read-only root.
worker_processes auto;
error_log /var/log/nginx/error.log notice;
pid /tmp/nginx.pid;
events {
    worker_connections 1024;
}
http {
    client_body_temp_path /tmp/client_temp;
    proxy_temp_path /tmp/proxy_temp;
    fastcgi_temp_path /tmp/fastcgi_temp;
    uwsgi_temp_path /tmp/uwsgi_temp;
    scgi_temp_path /tmp/scgi_temp;
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    access_log /var/log/nginx/access.log;
    sendfile on;
    keepalive_timeout 65;
    include /etc/nginx/conf.d/*.conf;
}
EOC
  cat > "$r/etc/nginx/conf.d/default.conf" <<'EOC'
server {
    listen 8080;
    server_name localhost;
    location / {
        root /usr/share/nginx/html;
        index index.html;
    }
}
EOC
  printf '<!doctype html><title>nginx fixture</title><p>nginx stand-in image of the agent-rl-infra node fixture (Debian nginx, not nginxinc/nginx-unprivileged)</p>\n' \
    > "$r/usr/share/nginx/html/index.html"
  ln -sf /dev/stdout "$r/var/log/nginx/access.log"
  ln -sf /dev/stderr "$r/var/log/nginx/error.log"
  # The image's own writable paths belong to uid 101, gid 0 (as in that image), for a writable root.
  chown -R 101:0 "$r"/var/cache/nginx "$r"/etc/nginx "$r"/var/lib/nginx "$r"/var/log/nginx
  chmod -R g+w "$r"/var/cache/nginx "$r"/etc/nginx "$r"/var/lib/nginx
  # Its default config parses (as root: its logs are links to /dev/stdout and /dev/stderr, which
  # here are this script's root-owned files; the node test runs nginx as uid 101 in a pod).
  chroot_proc "$r" "$r" nginx -t -q || { log "ERROR: nginx -t of the image's default config failed"; exit 1; }
  oci_archive "$r" "$out/nginx.oci.tar" "$NGINX_IMAGE" \
    '{"User":"101","Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"ExposedPorts":{"8080/tcp":{}},"StopSignal":"SIGQUIT","Cmd":["nginx","-g","daemon off;"]}'
  rm -rf "$r"
  log "nginx $v image laid out and archived in $(secs "$t0")s ($(du -h "$out/nginx.oci.tar" | cut -f1))"
}
ng_stamp="$NGINX_SUITE-minbase+nginx fn=$(fn_hash build_nginx)"
if stale nginx "$ng_stamp"; then build_nginx; printf '%s' "$ng_stamp" > "$out/nginx.stamp"; fi

# --- OpenEnv env server: the echo env of openenv's own template -------------------------------------
# What the server imports, at the lock's pins (python/requirements-test.txt as constraints): openenv
# itself without its dependencies, then FastAPI, uvicorn, websockets and fastmcp (http_server.py
# imports mcp_environment, which imports fastmcp). Left out of openenv's dependencies: gradio (the web
# UI, off unless ENABLE_WEB_INTERFACE), openai, huggingface_hub and the CLI's typer/tomli: the server
# never imports them (measured: 118 MB against 453 MB for `pip install openenv==0.10.0`). The CLI's
# dependencies are installed apart, only to run `openenv init`, and removed.
OPENENV_SERVER_PACKAGES=(fastapi uvicorn websockets fastmcp pydantic pyyaml requests packaging typing_extensions)
OPENENV_CLI_PACKAGES=(typer rich huggingface_hub tomli tomli-w openai)
# The image is also the node tests' Python client image (openenv's client, a pod standing in for a
# sandbox's agent): OpenAI's own client, at the lock's pin, in the same venv, for the ingress test.
OPENAI_CLIENT_PACKAGES=(openai)
build_openenv_echo() {
  local r="$build/openenv-rootfs" t0
  t0=$(date +%s.%N)
  cached_minbase "$r" bookworm python3,python3-venv
  log "bookworm minbase + python3, python3-venv (debootstrap, or its cached tar) in $(secs "$t0")s"
  t0=$(date +%s.%N)
  strip_rootfs "$r"
  # The template's Dockerfile: a venv at /app/.venv, the env at /app/env.
  if ! pip_chroot "$r" "$build/openenv-pip.log" "
      python3 -m venv /app/.venv
      /app/.venv/bin/pip install -q -c /tmp/constraints.txt ${OPENENV_SERVER_PACKAGES[*]}
      /app/.venv/bin/pip install -q --no-deps openenv==$OPENENV_VERSION
      /app/.venv/bin/pip install -q -c /tmp/constraints.txt ${OPENAI_CLIENT_PACKAGES[*]}
      /app/.venv/bin/pip install -q --target /tmp/openenv-cli -c /tmp/constraints.txt ${OPENENV_CLI_PACKAGES[*]}
      cd /app && PYTHONPATH=/tmp/openenv-cli /app/.venv/bin/openenv init echo_env --output-dir /app >/dev/null
      mv /app/echo_env /app/env
      /app/.venv/bin/pip uninstall -q -y pip setuptools
      rm -rf /tmp/openenv-cli /tmp/constraints.txt /tmp/ca-certificates.crt
      cd /app/env && PYTHONPATH=/app/env /app/.venv/bin/python -c 'import server.app'
  "; then
    tail -30 "$build/openenv-pip.log" >&2
    log "ERROR: the OpenEnv echo env's install failed (log: $build/openenv-pip.log)"; exit 1
  fi
  [[ -f "$r/app/env/server/app.py" && -f "$r/app/env/openenv.yaml" ]] || { log "ERROR: openenv init wrote no server/app.py under /app/env"; exit 1; }
  # The bytecode pip and the import check compiled stays: the pods' root is read-only, so Python
  # could not cache it there.
  oci_archive "$r" "$out/openenv-echo.oci.tar" "$OPENENV_IMAGE" \
    '{"Env":["PATH=/app/.venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","PYTHONPATH=/app/env"],"WorkingDir":"/app","ExposedPorts":{"8000/tcp":{}},"Cmd":["sh","-c","cd /app/env && uvicorn server.app:app --host 0.0.0.0 --port 8000"]}'
  rm -rf "$r"
  log "openenv-echo image (openenv $OPENENV_VERSION) laid out and archived in $(secs "$t0")s ($(du -h "$out/openenv-echo.oci.tar" | cut -f1))"
}
oe_stamp="bookworm-minbase+python3 openenv=$OPENENV_VERSION lock=$(sha256sum "$REPO_ROOT/python/requirements-test.txt" | cut -c1-16) fn=$(fn_hash cached_minbase pip_chroot build_openenv_echo) pkgs=${OPENENV_SERVER_PACKAGES[*]} cli=${OPENENV_CLI_PACKAGES[*]} client=${OPENAI_CLIENT_PACKAGES[*]}"
if stale openenv-echo "$oe_stamp"; then build_openenv_echo; printf '%s' "$oe_stamp" > "$out/openenv-echo.stamp"; fi

# --- trainer STAND-IN (for the stack's images.trainer: trainer/blackbox/Dockerfile) ----------------
# Not the vLLM image (no GPU, no registry): Debian bookworm minbase + python3 with what the black-box
# image puts beside the script, laid out as trainer/blackbox/Dockerfile does where it matters to the
# platform: the backend package (python/, pip install --no-deps) and its one dependency
# (k8s-agent-sandbox, at the lock's pin, with its own) in the Python on PATH, the args check at
# /usr/local/lib/agentrl/args_check.py (the real file), WORKDIR /app, no entrypoint, root as the vLLM
# image runs. Stand-ins, named in their own files: /app/opencode_hf_sandbox.py (trainer-standin/
# trainer.py: a parser from the program's recorded facts, then the platform's paths from inside the
# pod) and `vllm` (trainer-standin/vllm: python/tests/stub_model.py behind `vllm serve`).
TRAINER_PACKAGES=(k8s-agent-sandbox)
build_trainer_standin() {
  local r="$build/trainer-rootfs" t0 facts
  t0=$(date +%s.%N)
  facts="$(cd "$REPO_ROOT" && node --import tsx test/node/trainer-standin/facts.ts opencode_hf_sandbox)" ||
    { log "ERROR: test/node/trainer-standin/facts.ts failed (it runs with node and the project's tsx: node on PATH, npm ci done)"; exit 1; }
  cached_minbase "$r" bookworm python3,python3-venv
  log "bookworm minbase + python3, python3-venv (debootstrap, or its cached tar) in $(secs "$t0")s"
  t0=$(date +%s.%N)
  strip_rootfs "$r"
  mkdir -p "$r/tmp/python/agent_rl_sandbox"
  cp "$REPO_ROOT/python/pyproject.toml" "$r/tmp/python/"
  cp "$REPO_ROOT"/python/agent_rl_sandbox/*.py "$r/tmp/python/agent_rl_sandbox/"
  if ! pip_chroot "$r" "$build/trainer-pip.log" "
      python3 -m venv /opt/agentrl/venv
      /opt/agentrl/venv/bin/pip install -q -c /tmp/constraints.txt ${TRAINER_PACKAGES[*]}
      /opt/agentrl/venv/bin/pip install -q --no-deps /tmp/python
      /opt/agentrl/venv/bin/pip uninstall -q -y pip setuptools
      rm -rf /tmp/python /tmp/constraints.txt /tmp/ca-certificates.crt
      /opt/agentrl/venv/bin/python -c 'import agent_rl_sandbox.agent_sandbox, k8s_agent_sandbox'
  "; then
    tail -30 "$build/trainer-pip.log" >&2
    log "ERROR: the trainer stand-in's install failed (log: $build/trainer-pip.log)"; exit 1
  fi
  mkdir -p "$r/app" "$r/usr/local/lib/agentrl" "$r/opt/agentrl-standin"
  install -m 0644 "$REPO_ROOT/components/training/args/args_check.py" "$r/usr/local/lib/agentrl/args_check.py"
  install -m 0644 "$NODE_HERE/trainer-standin/trainer.py" "$r/app/opencode_hf_sandbox.py"
  install -m 0755 "$NODE_HERE/trainer-standin/vllm" "$r/usr/local/bin/vllm"
  install -m 0644 "$REPO_ROOT/python/tests/stub_model.py" "$r/opt/agentrl-standin/stub_model.py"
  printf '%s\n' "$facts" > "$r/opt/agentrl-standin/program-facts.json"
  # The stand-ins parse and refuse as they should, in the rootfs (the args check on an accepted
  # and on an unknown flag; `vllm` refusing another subcommand).
  chroot "$r" /opt/agentrl/venv/bin/python /usr/local/lib/agentrl/args_check.py /app/opencode_hf_sandbox.py --sandbox-vllm-url http://x >/dev/null
  local code=0
  chroot "$r" /opt/agentrl/venv/bin/python /usr/local/lib/agentrl/args_check.py /app/opencode_hf_sandbox.py --sandbox-vllm-url http://x --no-such-flag 2>/dev/null || code=$?
  (( code == 2 )) || { log "ERROR: the args check on the trainer stand-in with --no-such-flag exited $code, not argparse's 2"; exit 1; }
  code=0; chroot "$r" /usr/local/bin/vllm bench 2>/dev/null || code=$?
  (( code == 2 )) || { log "ERROR: the vllm stand-in given another subcommand than serve exited $code, not argparse's 2"; exit 1; }
  oci_archive "$r" "$out/trainer-standin.oci.tar" "$TRAINER_STANDIN_IMAGE" \
    '{"Env":["PATH=/opt/agentrl/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","VLLM_USE_FLASHINFER_SAMPLER=0"],"WorkingDir":"/app","ExposedPorts":{"8000/tcp":{}},"Cmd":["bash"]}'
  rm -rf "$r"
  log "trainer-standin image laid out and archived in $(secs "$t0")s ($(du -h "$out/trainer-standin.oci.tar" | cut -f1))"
}
if want trainer-standin; then
  tr_stamp="bookworm-minbase+python3 lock=$(sha256sum "$REPO_ROOT/python/requirements-test.txt" | cut -c1-16) fn=$(fn_hash cached_minbase pip_chroot build_trainer_standin) pkgs=${TRAINER_PACKAGES[*]} src=$(cat "$REPO_ROOT"/python/pyproject.toml "$REPO_ROOT"/python/agent_rl_sandbox/*.py \
    "$REPO_ROOT/components/training/args/args_check.py" "$REPO_ROOT/components/config/programs.ts" "$REPO_ROOT/python/tests/stub_model.py" \
     "$NODE_HERE"/trainer-standin/{trainer.py,vllm,facts.ts} | sha256sum | cut -c1-16)"
  if stale trainer-standin "$tr_stamp"; then build_trainer_standin; printf '%s' "$tr_stamp" > "$out/trainer-standin.stamp"; fi
fi
ls -la "$out" >&2
