/**
 * Per-rollout keys at the ingress (docs/design/rollout-keys.md): the nginx fragments that tell a
 * rollout key from an operator's key, ask the verifier about it (`auth_request`), rate-limit it on
 * its own and log its rollout. Pure; nginx.ts places the fragments. Imports nothing from its folder.
 *
 * nginx order matters here: limit_req runs in the preaccess phase, before auth_request's access
 * phase (nginx development guide, "Request phases"), so the rate-limit key cannot come from
 * `auth_request_set`. It is the key itself (operators' keys: their name, as before; rollout keys: the
 * whole token, secret part included), so a client guessing another rollout's id cannot spend that
 * rollout's budget, and every rollout has a bucket of its own.
 *
 * A bucket per token alone lets forged tokens (each its own bucket) reach the verifier without bound,
 * so every header of the rollout-key shape is also limited per source address, before auth_request:
 * a sandbox pod has an address of its own and reaches the ingress through its ClusterIP Service
 * without source NAT (kubernetes/website content/en/docs/tutorials/services/source-ip.md), and holds
 * one rollout key, so its bucket is that key's budget and a flood from one pod spends only its own.
 */

/** A rollout key as the verifier mints it (python/agent_rl_sandbox/rollout_keys.py KEY_RE). */
export const ROLLOUT_KEY_PATTERN = "rk1\\.[A-Za-z0-9_-]{43}";
/** The internal location nginx's auth_request subrequest goes to. */
export const ROLLOUT_VERIFY_LOCATION = "/_ingress/rollout-key";
/** The verifier's route (rollout_keys.py VerifyHandler). */
export const ROLLOUT_VERIFY_PATH = "/verify";
/** Seconds nginx waits for the verifier (connect / read): it answers from memory. */
export const ROLLOUT_VERIFY_TIMEOUT_SECONDS = 5;

/** http-level maps: the rollout token, the rate-limit key and the client's name for the log. */
export function rolloutKeyMaps(): string[] {
    return [
        "    # Rollout keys (minted per rollout by the verifier): the token when the header holds one, else empty.",
        "    map $http_authorization $ingress_rollout_token {",
        '        default "";',
        `        "~^Bearer (${ROLLOUT_KEY_PATTERN})$" $1;`,
        "    }",
        "    # Rate-limit key: an operator key's name (as before), else the rollout token itself (one bucket per rollout key).",
        "    map $ingress_key_name $ingress_limit_key {",
        "        default $ingress_key_name;",
        '        "" $ingress_rollout_token;',
        "    }",
        "    # Per-source limit key: the client's address for a header of the rollout-key shape (forged or not), else empty (not counted).",
        "    map $ingress_key_name $ingress_rollout_source {",
        '        default "";',
        '        "" $ingress_rollout_source_addr;',
        "    }",
        "    map $ingress_rollout_token $ingress_rollout_source_addr {",
        "        default $binary_remote_addr;",
        '        "" "";',
        "    }",
        '    # The log\'s "key": the operator key\'s name, or "rollout" (the rollout id is its own field).',
        "    map $ingress_rollout_id $ingress_client_name {",
        "        default rollout;",
        '        "" $ingress_key_name;',
        "    }",
        "",
    ];
}

/** The per-source zone name: rollout-key-shaped headers, counted per client address (see the file's comment). */
export const ROLLOUT_SOURCE_ZONE = "ingress_rollout_per_source";

/** The per-source zone, at the per-key rate: a pod holds one rollout key, so its address gets that key's budget. */
export function rolloutSourceZone(ratePerSecond: number): string[] {
    return [
        "    # Rollout-key-shaped headers per source address, before the verifier is asked: forged tokens spend their pod's bucket only.",
        `    limit_req_zone $ingress_rollout_source zone=${ROLLOUT_SOURCE_ZONE}:10m rate=${ratePerSecond}r/s;`,
    ];
}

/** Where the verifier is reached: an upstream group with keep-alive, or (with a resolver) a name looked up per request. */
export function rolloutVerifierUpstream(verifier: string, resolved: boolean): string[] {
    if (resolved) return [];
    return ["    upstream ingress_rollout_verifier {", `        server ${verifier} max_fails=0;`, "        keepalive 32;", "    }"];
}

/**
 * The internal location the auth subrequest reaches: an operator's key passes at once (204, the
 * verifier is not asked); a rollout key is sent to the verifier with the route it asks for, and
 * its 401/403 become the client's answer (auth_request passes both through).
 */
export function rolloutVerifyLocation(verifier: string, resolved: boolean): string[] {
    const target = resolved ? "$ingress_verifier_host" : "ingress_rollout_verifier";
    return [
        `        location = ${ROLLOUT_VERIFY_LOCATION} {`,
        "            internal;",
        '            if ($ingress_key_name != "") {',
        "                return 204;",
        "            }",
        ...(resolved ? [`            set $ingress_verifier_host ${verifier};`] : []),
        `            proxy_pass http://${target}${ROLLOUT_VERIFY_PATH};`,
        // A subrequest of a POST: the verifier serves GET only, and gets no body.
        "            proxy_method GET;",
        "            proxy_pass_request_body off;",
        "            proxy_http_version 1.1;",
        // proxy_set_header here replaces every server-level one (nginx inherits them only when a level sets none).
        '            proxy_set_header Connection "";',
        '            proxy_set_header Content-Length "";',
        "            proxy_set_header Authorization $http_authorization;",
        "            proxy_set_header X-Original-URI $request_uri;",
        "            proxy_set_header X-Original-Method $request_method;",
        `            proxy_connect_timeout ${ROLLOUT_VERIFY_TIMEOUT_SECONDS}s;`,
        `            proxy_read_timeout ${ROLLOUT_VERIFY_TIMEOUT_SECONDS}s;`,
        "        }",
    ];
}

/** The lines an authenticated route adds: the per-source limit (`burst`: " burst=N", or "" for nginx's 0), the auth subrequest and the rollout id it returns. */
export function rolloutRouteLines(burst: string): string[] {
    return [
        `            limit_req zone=${ROLLOUT_SOURCE_ZONE}${burst} nodelay;`,
        "            # A rollout key is live only while the verifier says so (revoked at the rollout's end, expired after its ttl).",
        `            auth_request ${ROLLOUT_VERIFY_LOCATION};`,
        "            auth_request_set $ingress_rollout_id $upstream_http_x_rollout_id;",
    ];
}
