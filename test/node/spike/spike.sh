#!/usr/bin/env bash
# The node spike end to end (../SPIKE.md): one real node (up.sh), the sandbox pool's own pod on
# the spike's sandbox-runtime image, two busybox clients, and the pool's own NetworkPolicy,
# measured with real connections from the clients' network namespaces:
#   without the policy both clients reach the runtime's /healthz; with it only the trainer
#   stand-in does (the other times out or is refused); the sandbox stays Ready behind its
#   readiness probe; without it again both do.
# Results (PASS/FAIL lines and timings) go to $SPIKE_RESULTS (default /tmp/arl-node-spike-results.txt);
# exit 0 only when every check passed and cleanup.sh found nothing left.
# Prerequisites: fetch.sh, build.sh, images.sh (all cached after the first run), and the API server
# fixture's binaries (test/apiserver/build.sh).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
RESULTS="${SPIKE_RESULTS:-/tmp/arl-node-spike-results.txt}"
: > "$RESULTS"
failures=0
res() { printf '%s\n' "$*" | tee -a "$RESULTS" >&2; }
check() { # NAME CONDITION_RC DETAIL
  if [[ "$2" == 0 ]]; then res "PASS $1: $3"; else res "FAIL $1: $3"; failures=$((failures + 1)); fi
}
finish() {
  local rc=$?
  if [[ -d "$W/logs" && "${KEEP_LOGS:-1}" == 1 ]]; then
    mkdir -p "${RESULTS%.txt}-logs"; cp -r "$W/logs/." "$W/timeline" "${RESULTS%.txt}-logs/" 2>/dev/null || true
  fi
  if bash "$SPIKE_HERE/cleanup.sh"; then res "PASS cleanup: nothing left"; else res "FAIL cleanup: leftovers (see above)"; rc=1; fi
  exit $(( rc != 0 || failures > 0 ))
}
trap finish EXIT
secs() { printf '%.1f' "$(echo "$(date +%s.%N) - $1" | bc)"; }

t_up=$(date +%s.%N)
bash "$SPIKE_HERE/up.sh" || { res "FAIL up: node did not come up"; exit 1; }
res "TIME up.sh (netns, etcd, kube-apiserver, containerd, kubelet, kube-router, image import, node Ready): $(secs "$t_up")s"
sed 's/^/TIMELINE /' "$W/timeline" >> "$RESULTS"

render="$W/render"
(cd "$REPO_ROOT" && npx tsx test/node/spike/render-sandbox.ts "$render" "$NODE_NAME" "$RUNTIME_IMAGE" "$BUSYBOX_IMAGE") || { res "FAIL render"; exit 1; }
. "$render/names.env"

t_apply=$(date +%s.%N)
kc apply -f "$render/objects.json" >&2 || { res "FAIL apply objects"; exit 1; }
ready=1
for _ in $(seq 1 360); do
  [[ "$(kc -n "$SANDBOX_NS" get pod sandbox-spike -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" == True ]] && { ready=0; break; }
  sleep 0.5
done
check "sandbox pod Ready" $ready "sandbox-spike Ready $(secs "$t_apply")s after kubectl apply (forwarder sidecar startupProbe, runtime readinessProbe httpGet $HEALTH_PATH:$SANDBOX_PORT)"
if (( ready != 0 )); then
  kc -n "$SANDBOX_NS" describe pod sandbox-spike >&2 || true
  tail -40 "$W/logs/kubelet.log" >&2
  exit 1
fi
for p in trainer-standin not-trainer; do
  kc -n "$TRAINER_NS" wait --for=condition=Ready --timeout=60s "pod/$p" >&2 || { res "FAIL client $p not Ready"; exit 1; }
done
res "TIME all three pods Ready: $(secs "$t_apply")s after kubectl apply"

sandbox_ip=$(kc -n "$SANDBOX_NS" get pod sandbox-spike -o jsonpath='{.status.podIP}')
cid() { kc -n "$1" get pod "$2" -o jsonpath="{.status.containerStatuses[?(@.name==\"$3\")].containerID}" | sed 's|^containerd://||'; }
trainer_cid=$(cid "$TRAINER_NS" trainer-standin client)
other_cid=$(cid "$TRAINER_NS" not-trainer client)
sandbox_cid=$(cid "$SANDBOX_NS" sandbox-spike sandbox)
res "INFO sandbox pod IP $sandbox_ip"
n=0
# connect CONTAINER_ID: wget the runtime's health path from that container (its own network namespace)
connect() {
  n=$((n + 1))
  local out rc t0
  t0=$(date +%s.%N)
  # busybox-static's wget segfaults here (rc 139, glibc static NSS); nc does the HTTP by hand.
  out=$(ctr_ tasks exec --exec-id "probe$n" "$1" sh -c "printf 'GET $HEALTH_PATH HTTP/1.0\r\n\r\n' | nc -w 3 $sandbox_ip $SANDBOX_PORT" 2>&1); rc=$?
  grep -q '200 OK' <<<"$out" || rc=${rc/#0/1}
  LAST="rc=$rc in $(secs "$t0")s: $(printf '%s' "$out" | tr '\n' ' ' | cut -c1-160)"
  return $rc
}

# The runtime as the pool runs it: uid, read-only root, a command through POST /exec.
out=$(ctr_ tasks exec --exec-id whoami "$sandbox_cid" sh -c 'id -u; touch /probe-ro 2>&1; echo "touch rc=$?"; touch /root/ok && echo home-writable' 2>&1)
grep -qx "$RUN_AS_USER" <<<"$out" && grep -q 'Read-only file system' <<<"$out" && grep -q home-writable <<<"$out"
check "sandbox container uid $RUN_AS_USER, read-only root, writable HOME" $? "$(tr '\n' ' ' <<<"$out")"
out=$(ctr_ tasks exec --exec-id execapi "$trainer_cid" sh -c 'b="{\"cmd\": \"id -u; echo \$HOME\"}"
  printf "POST /exec HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: ${#b}\r\n\r\n$b" | nc -w 5 "$0" "$1"' "$sandbox_ip" "$SANDBOX_PORT" 2>&1)
grep -q '"exit_code": *0' <<<"$out" && grep -q "$RUN_AS_USER" <<<"$out"
check "POST /exec from the trainer stand-in runs a command in the sandbox" $? "$(tr '\n' ' ' <<<"$out" | cut -c1-200)"

# egress EXEC_ID: from the sandbox container to the API server's port on the node address
egress() {
  ctr_ tasks exec --exec-id "$1" "$sandbox_cid" python3 -I -c "
import socket
try:
    socket.create_connection(('$NODE_IP', $API_PORT), 3); print('connected')
except OSError as e:
    print('refused-or-timeout', e)" 2>&1
}
out=$(egress egress1); grep -qx connected <<<"$out"; check "no policy: sandbox -> API server ($NODE_IP:$API_PORT) connects" $? "$out"
connect "$trainer_cid"; check "no policy: trainer stand-in -> sandbox:$SANDBOX_PORT connects" $? "$LAST"
connect "$other_cid"; check "no policy: not-trainer -> sandbox:$SANDBOX_PORT connects" $? "$LAST"

t_pol=$(date +%s.%N)
kc apply -f "$render/policy.json" >&2 || { res "FAIL apply policy"; exit 1; }
dropped=1
for _ in $(seq 1 20); do
  if ! connect "$other_cid"; then dropped=0; break; fi
  sleep 0.5
done
check "policy: not-trainer -> sandbox:$SANDBOX_PORT dropped" $dropped "$LAST; first failed attempt $(secs "$t_pol")s after kubectl apply"
connect "$other_cid"; rc=$?; check "policy: not-trainer -> sandbox dropped again" $(( rc == 0 )) "$LAST"
connect "$trainer_cid"; check "policy: trainer stand-in -> sandbox:$SANDBOX_PORT still connects" $? "$LAST"
out=$(egress egress2); grep -q refused-or-timeout <<<"$out"; check "policy: sandbox -> API server ($NODE_IP:$API_PORT) egress dropped" $? "$out"
sleep 8
[[ "$(kc -n "$SANDBOX_NS" get pod sandbox-spike -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" == True ]]
check "policy: sandbox still Ready 8 s later (kubelet's probe from the node passes)" $? "Ready=$(kc -n "$SANDBOX_NS" get pod sandbox-spike -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')"

kc delete -f "$render/policy.json" >&2
ok=1
for _ in $(seq 1 20); do connect "$other_cid" && { ok=0; break; }; sleep 0.5; done
check "policy deleted: not-trainer -> sandbox connects again" $ok "$LAST"

# The API server -> kubelet path (kubectl exec / logs need the node's non-loopback address).
out=$(kc -n "$TRAINER_NS" exec trainer-standin -- id -u 2>&1); rc=$?
check "kubectl exec through the API server and kubelet" $rc "$(tr '\n' ' ' <<<"$out" | cut -c1-200)"
out=$(kc -n "$SANDBOX_NS" logs sandbox-spike -c sandbox --tail=3 2>&1); rc=$?
check "kubectl logs of the runtime" $rc "$(tr '\n' ' ' <<<"$out" | cut -c1-200)"
res "SUMMARY $failures failed"
