#!/usr/bin/env bash
# Removes everything the node fixture made, then checks that nothing is left; exits 1 naming each
# leftover. Idempotent: safe to run when nothing is up. Order: processes (the ones up.sh recorded,
# every process in the node's network namespace, every process in its cgroups), mounts, cgroups,
# the network namespace (its bridge, veths, iptables rules and ipsets go with it), files outside
# the work dir (CNI result cache, /var/log/containers links), the kernel flags the
# kubelet changed, the work dir.
# `down.sh --check` removes nothing: it only names what is left (scripts/test/run.ts runs it after
# the tests, then down.sh itself when something is).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

cgroup_dirs() { # every mounted v1 hierarchy's copy of the node's cgroup root
  local m
  for m in /sys/fs/cgroup/*/; do [[ -d "$m$CGROUP_NAME" ]] && printf '%s\n' "$m$CGROUP_NAME"; done
}
node_pids() {
  local f d
  if [[ -d "$W/pids" ]]; then
    for f in "$W"/pids/*.pid; do [[ -f "$f" ]] && cat "$f"; echo; done
  fi
  ip netns pids "$NETNS" 2>/dev/null
  ip netns pids "$OUTSIDE_NETNS" 2>/dev/null
  for d in $(cgroup_dirs); do find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null; done
}
alive_pids() { local p; for p in $(node_pids | sort -un); do [[ -d /proc/$p ]] && printf '%s\n' "$p"; done; }

check_only=0; [[ "${1:-}" == --check ]] && check_only=1
host_rules_changed=0
if (( ! check_only )); then
# 1. processes: TERM, then KILL what is left (containers ignore TERM as PID 1).
pids="$(alive_pids)"
if [[ -n "$pids" ]]; then
  log "cleanup: stopping $(echo "$pids" | wc -l) processes"
  # shellcheck disable=SC2086
  kill -TERM $pids 2>/dev/null
  for _ in $(seq 1 20); do [[ -z "$(alive_pids)" ]] && break; sleep 0.25; done
  for _ in $(seq 1 40); do
    pids="$(alive_pids)"; [[ -z "$pids" ]] && break
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null; sleep 0.25
  done
fi

# 2. mounts: the node's mounts live in the private mount namespace that `ip netns exec` gave its
# processes, and go with them; unmount any that reached this namespace anyway (deepest first).
for _ in 1 2 3; do
  mapfile -t mnts < <(awk -v w="$W" -v c="$NODE_DIR/build" '$5 ~ "^"w || $5 ~ "^"c {print $5}' /proc/self/mountinfo | sort -r)
  (( ${#mnts[@]} == 0 )) && break
  for m in "${mnts[@]}"; do umount -l "$m" 2>/dev/null; done
done

# 3. cgroups (deepest first)
for d in $(cgroup_dirs); do find "$d" -depth -type d -exec rmdir {} + 2>/dev/null; done

# 4. network namespaces
ip netns delete "$NETNS" 2>/dev/null
ip netns delete "$OUTSIDE_NETNS" 2>/dev/null

# 5. files outside the work dir (and the empty mount point up.sh made for the device plugin directory)
if [[ -f "$HOST_DIRS_RECORD" ]]; then
  # The record keeps what could not be removed (not empty: something else wrote there), for --check.
  tac "$HOST_DIRS_RECORD" | while read -r d; do [[ -z "$d" ]] || rmdir "$d" 2>/dev/null || [[ ! -d "$d" ]] || printf '%s\n' "$d"; done > "$HOST_DIRS_RECORD.left"
  if [[ -s "$HOST_DIRS_RECORD.left" ]]; then mv "$HOST_DIRS_RECORD.left" "$HOST_DIRS_RECORD"; else rm -f "$HOST_DIRS_RECORD" "$HOST_DIRS_RECORD.left"; fi
fi
rm -f /var/lib/cni/results/"$CNI_NETWORK"-* 2>/dev/null
if [[ -d /var/log/containers ]]; then
  find /var/log/containers -maxdepth 1 -type l -lname "$W/*" -delete 2>/dev/null
fi
# Shim sockets (the hard-coded /run/containerd/s/, shared with any other containerd on the host,
# e.g. the Docker test's) are removed by the shims on TERM; none is deleted here, as it may be another's.

# 6. kernel flags: the kubelet sets vm.overcommit_memory, kernel.panic, kernel.panic_on_oops, ...
# (protectKernelDefaults: false); up.sh saved the values it found.
if [[ -f "$W/sysctl.orig" ]]; then
  while read -r k v; do [[ -n "$k" ]] && sysctl -q -w "$k=$v" >/dev/null; done < "$W/sysctl.orig"
fi

# 7. work dir (after comparing the host's iptables rules and ipsets with up.sh's record)
host_rules_changed=0
[[ -f "$W/host-iptables.sha" && "$(host_iptables)" != "$(cat "$W/host-iptables.sha")" ]] && host_rules_changed=1
rm -rf "$W"
fi

# check
left=()
named() { local p; for p in "$@"; do printf '%s(%s) ' "$p" "$(cat "/proc/$p/comm" 2>/dev/null)"; done; }
# shellcheck disable=SC2046
[[ -n "$(alive_pids)" ]] && left+=("processes: $(named $(alive_pids))")
for n in "$NETNS" "$OUTSIDE_NETNS"; do ip netns list 2>/dev/null | grep -qw "$n" && left+=("network namespace $n"); done
[[ -n "$(cgroup_dirs)" ]] && left+=("cgroups: $(cgroup_dirs | tr '\n' ' ')")
grep -qE " ($W|$NODE_DIR/build)" /proc/self/mountinfo && left+=("mounts under $W or $NODE_DIR/build")
compgen -G "/var/lib/cni/results/$CNI_NETWORK-*" >/dev/null && left+=("CNI results /var/lib/cni/results/$CNI_NETWORK-*")
[[ -e "$W" ]] && left+=("work dir $W")
if [[ -f "$HOST_DIRS_RECORD" ]]; then
  while read -r d; do [[ -n "$d" && -d "$d" ]] && left+=("directory $d (made by up.sh)"); done < "$HOST_DIRS_RECORD"
  left+=("$HOST_DIRS_RECORD")
fi
# The bridge and veths live in the netns; one in the host's namespace would have escaped it.
for dev in "$BRIDGE" "$NODE_DEV" "${NODE_DEV}p"; do ip link show "$dev" >/dev/null 2>&1 && left+=("network device $dev in the host's namespace"); done
(( host_rules_changed )) && left+=("the host's iptables rules or ipsets differ from before up.sh")
if (( ${#left[@]} > 0 )); then
  for l in "${left[@]}"; do log "cleanup: LEFT OVER: $l"; printf 'node fixture left over: %s\n' "$l"; done
  exit 1
fi
(( check_only )) && exit 0
log "cleanup: nothing left (processes, mounts, cgroups, netns $NETNS and $OUTSIDE_NETNS, CNI cache, $W)"
