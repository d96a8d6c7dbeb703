/**
 * The proxy's request limits, one set for a deployed stack (the ingress schema's defaults) and
 * for the proxy library on its own (PROXY_DEFAULTS, which `npm run ingress:local` and the
 * benchmark run), so the local proxy enforces what a stack enforces.
 */
export const INGRESS_LIMIT_DEFAULTS = {
    /** Largest request body accepted (nginx size). */
    maxBodySize: "4m",
    /** Requests per second allowed per key, per proxy replica. */
    rateLimitPerSecond: 50,
    /** Burst above the rate per key. */
    rateLimitBurst: 100,
    /** Seconds nginx waits for vLLM's response (long generations). */
    readTimeoutSeconds: 600,
} as const;
