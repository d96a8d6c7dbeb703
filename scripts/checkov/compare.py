"""Compares checkov's failed checks (its -o json reports, one per plan) with the reviewed allow-list.

allowlist.json: [{"check": "CKV_K8S_23", "resource": "<regex over checkov's Kind.namespace.name>",
"reason": "..."}]; a finding is allowed when an entry's check id is its own and the regex matches
its whole resource. Prints every finding outside the list and every entry no finding used.
Exit 0 when both are empty, else 1. Usage: compare.py ALLOWLIST REPORT.json...
"""

import json
import re
import sys
from pathlib import Path


def failed_checks(report_path):
    data = json.loads(Path(report_path).read_text(encoding="utf-8") or "{}")
    reports = data if isinstance(data, list) else [data]
    for r in reports:
        for c in (r.get("results") or {}).get("failed_checks", []):
            yield c


def main(argv):
    allow = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    for i, e in enumerate(allow):
        if not (isinstance(e.get("check"), str) and isinstance(e.get("resource"), str) and isinstance(e.get("reason"), str) and e["reason"].strip()):
            print("allowlist entry %d needs check, resource and a non-empty reason: %r" % (i, e))
            return 1
    rules = [(e["check"], re.compile(e["resource"])) for e in allow]
    used = [0] * len(allow)
    outside = []
    total = 0
    for path in argv[2:]:
        case = Path(path).stem
        for c in failed_checks(path):
            total += 1
            hit = next((i for i, (cid, rx) in enumerate(rules) if cid == c["check_id"] and rx.fullmatch(c["resource"])), None)
            if hit is None:
                outside.append("%s: %s %s (%s)" % (case, c["check_id"], c["resource"], c.get("check_name", "")))
            else:
                used[hit] += 1
    stale = ["%s %s" % (allow[i]["check"], allow[i]["resource"]) for i, n in enumerate(used) if n == 0]
    print("%d plans, %d findings: %d allowed by %d entries, %d outside the allow-list, %d stale entries" % (len(argv) - 2, total, total - len(outside), len(allow), len(outside), len(stale)))
    for line in outside:
        print("OUTSIDE " + line)
    for line in stale:
        print("STALE   " + line)
    return 1 if outside or stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
