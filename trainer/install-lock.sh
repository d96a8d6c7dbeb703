#!/usr/bin/env bash
# Install the trainer lock (trainer/requirements.txt, plus any extra requirement arguments)
# into the vLLM base image's Python without replacing what that image owns: vllm, torch and
# its CUDA stack. How that is guaranteed:
#   1. their installed versions become a constraints file (-c), so pip can only keep them;
#   2. vllm==<installed> is part of the request, so every other version pip picks must still
#      satisfy vLLM's own requirements (pip does not check installed packages it was not asked
#      about);
#   3. afterwards every held package is compared with its version before, and `pip check`
#      may report no problem that was not there before the install.
# Any of these failing fails the build, naming the package.
#
#   install-lock.sh <requirements.txt> [more requirements or pip arguments...]
set -euo pipefail
requirements="$1"
shift
pip=(python3 -m pip)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# The names trainer/lock.py leaves out of the lock (its GUARDED pattern).
held='^(vllm|torch|torchvision|torchaudio|triton|xformers|flashinfer[a-z0-9_.-]*|nvidia-[a-z0-9_.-]*|cuda-[a-z0-9_.-]*)=='

"${pip[@]}" list --format=freeze >"$work/before.txt"
grep -iE "$held" "$work/before.txt" >"$work/held.txt" || true
vllm_pin="$(grep -iE '^vllm==' "$work/held.txt" || true)"
[[ -n "$vllm_pin" ]] || {
    echo "install-lock: vllm is not installed in this image: the trainer images build FROM the vLLM image" >&2
    exit 1
}
torch_pin="$(grep -iE '^torch==' "$work/held.txt" || true)"
echo "install-lock: holding $(wc -l <"$work/held.txt") packages of the base image ($vllm_pin, $torch_pin)"
"${pip[@]}" check >"$work/check-before.txt" 2>&1 || true

# PEP 668: the image's Python is the system one; this image is the only user of it.
PIP_BREAK_SYSTEM_PACKAGES=1 "${pip[@]}" install --no-cache-dir -c "$work/held.txt" -r "$requirements" "$vllm_pin" "$@"

"${pip[@]}" list --format=freeze >"$work/after.txt"
changed=0
while IFS= read -r pin; do
    if ! grep -qixF "$pin" "$work/after.txt"; then
        name="${pin%%==*}"
        now="$(grep -iE "^${name}==" "$work/after.txt" || echo "$name: removed")"
        echo "install-lock: the base image's $pin was replaced ($now)" >&2
        changed=1
    fi
done <"$work/held.txt"
"${pip[@]}" check >"$work/check-after.txt" 2>&1 || true
if new="$(grep -vxF -f "$work/check-before.txt" "$work/check-after.txt" | grep -v '^No broken requirements found')"; then
    echo "install-lock: pip check reports problems the install added:" >&2
    echo "$new" >&2
    changed=1
fi
[[ $changed == 0 ]] || exit 1
echo "install-lock: installed $(basename "$requirements") on $vllm_pin, $torch_pin (held packages unchanged)"
