/** Whether this machine has nginx, for suites that run the generated config on a real one. */
import { findNginx } from "../../components/ingress/local";

function nginxOrUndefined(): string | undefined {
    try {
        return findNginx();
    } catch {
        return undefined;
    }
}

/** The `skip` option of a suite that needs nginx: false where it is installed, else the reason and the fix. */
export const skipWithoutNginx: false | string = nginxOrUndefined() ? false : "needs nginx (apt-get install -y nginx-light)";
