// Python run in a pod on the fixture's OpenEnv image (test/node/images.sh openenv-echo), which has
// openenv's own client installed.

/** One real OpenEnv session with openenv's own client (GenericEnvClient over WS /ws); the env's base URL is argv[1]. Prints one JSON line. */
export const SESSION_PY = `
import json, sys
from openenv.core.generic_client import GenericEnvClient
out = {}
with GenericEnvClient(base_url=sys.argv[1]).sync() as env:
    r = env.reset()
    out["reset"] = {"observation": r.observation, "reward": r.reward, "done": r.done}
    r = env.step({"message": "hello from the node"})
    out["step"] = {"observation": r.observation, "reward": r.reward, "done": r.done}
    out["state"] = env.state()
print(json.dumps(out, default=str))
`;

/**
 * GET a URL (argv[1]) within argv[2] seconds (5 when not given): the status on the first line, then
 * the body; a connection failure exits 1 (python3's urllib: the image has no curl).
 */
export const GET_PY = `
import sys, urllib.request, urllib.error
try:
    r = urllib.request.urlopen(sys.argv[1], timeout=float(sys.argv[2]) if len(sys.argv) > 2 else 5)
    print(r.status); print(r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code); print(e.read().decode())
`;
