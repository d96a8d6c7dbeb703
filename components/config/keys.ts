/**
 * The ingress's Bearer keys: what a key name and a key may be, decided once. The config edge
 * checks supplied `ingressKey-<name>` secrets with it; the proxy library renders only keys that
 * pass it (components/ingress/nginx.ts), so a key can never break out of the nginx config.
 */

const KEY_NAME_RE = /^[a-z0-9-]{1,63}$/;
// No quote, space, ';', '{', '}', '$' or '\\': a key can never end the quoted map entry or inject a directive.
const KEY_RE = /^[A-Za-z0-9._~+/=-]{16,512}$/;

/** A key allowed through the proxy: `name` is what the logs show, `key` the Bearer secret. */
export interface IngressKey {
    /** Log-safe identifier ([a-z0-9-]+), e.g. the sandbox pool name. */
    readonly name: string;
    /** The secret sent as "Authorization: Bearer <key>" ([A-Za-z0-9._~+/=-], at least 16 characters). */
    readonly key: string;
}

/** Check keys; returns every problem without echoing any secret. */
export function validateKeys(keys: ReadonlyArray<IngressKey>): string[] {
    const errs: string[] = [];
    if (!Array.isArray(keys) || keys.length === 0) return ["keys: at least one { name, key } is required (an empty key set would lock every client out)"];
    const names = new Set<string>();
    const secrets = new Set<string>();
    keys.forEach((k, i) => {
        const name = k?.name;
        if (typeof name !== "string" || !KEY_NAME_RE.test(name)) errs.push(`keys[${i}].name: ${JSON.stringify(name)} must match [a-z0-9-]{1,63}`);
        else if (names.has(name)) errs.push(`keys[${i}].name: "${name}" is used twice; names must be unique`);
        else names.add(name);
        const key = k?.key;
        const label = typeof name === "string" && KEY_NAME_RE.test(name) ? `"${name}"` : `keys[${i}]`;
        if (typeof key !== "string" || !KEY_RE.test(key)) {
            errs.push(`keys[${i}].key (${label}): must be 16..512 characters of [A-Za-z0-9._~+/=-] (e.g. openssl rand -hex 32); value not shown`);
        } else if (secrets.has(key)) errs.push(`keys[${i}].key (${label}): same secret as an earlier entry; every key must be distinct`);
        else secrets.add(key);
    });
    return errs;
}
