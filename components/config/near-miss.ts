/**
 * The near miss of a misspelled name: the one suggestion every "unknown" message makes (stack keys,
 * fields at any depth of the platform and cluster objects). Pure; imports nothing.
 */

/** Edit distance (insert, delete, substitute, swap two neighbours), case-insensitive. */
function distance(a: string, b: string): number {
    const x = a.toLowerCase();
    const y = b.toLowerCase();
    const d: number[][] = Array.from({ length: x.length + 1 }, (_, i) => Array.from({ length: y.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
    for (let i = 1; i <= x.length; i++) {
        for (let j = 1; j <= y.length; j++) {
            const cost = x[i - 1] === y[j - 1] ? 0 : 1;
            d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
            if (i > 1 && j > 1 && x[i - 1] === y[j - 2] && x[i - 2] === y[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
        }
    }
    return d[x.length][y.length];
}

/** The candidate `word` is most likely a misspelling of (at most 2 edits, fewer for short words), or undefined. */
export function nearMiss(word: string, candidates: readonly string[]): string | undefined {
    const limit = word.length <= 4 ? 1 : 2;
    let best: { c: string; d: number } | undefined;
    for (const c of candidates) {
        const d = distance(word, c);
        if (d <= limit && (best === undefined || d < best.d)) best = { c, d };
    }
    return best?.c;
}
