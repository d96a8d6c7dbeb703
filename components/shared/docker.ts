/**
 * Facts about Docker the components share.
 */

/**
 * Docker's embedded DNS server, inside every container on a user-defined network: it answers
 * container names and aliases of the networks the container is on, with the addresses they
 * have now (a recreated container is found again under its name).
 */
export const DOCKER_EMBEDDED_DNS = "127.0.0.11";
