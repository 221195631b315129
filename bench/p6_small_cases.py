"""IMO 2025 P6 at small n, the check behind the lab's `tool_refute` (docs/bench-policy.md, "The
python tool"): `solver tool run bench/p6_small_cases.py` prints the fewest rectangles over every
permutation against the 2n - 2 that DeepSeek-Math-V2's proof claims."""

from itertools import permutations


def fewest(n, perm):
    free = {(r, c) for r in range(n) for c in range(n) if perm[r] != c}
    best = [len(free)]

    def go(left, used):
        if used >= best[0]:
            return
        if not left:
            best[0] = used
            return
        r, c = min(left)
        # every rectangle with (r, c) as its top-left cell, inside the free cells left
        width = 0
        while (r, c + width) in left:
            width += 1
        for w in range(1, width + 1):
            h = 0
            while all((r + h, c + j) in left for j in range(w)):
                h += 1
                cells = {(r + i, c + j) for i in range(h) for j in range(w)}
                go(left - cells, used + 1)

    go(frozenset(free), 0)
    return best[0]


for n in range(2, 6):
    results = {p: fewest(n, p) for p in permutations(range(n))}
    low = min(results.values())
    diagonal = results[tuple(range(n))]
    print(f"n={n}: minimum {low}, identity permutation {diagonal}, claimed 2n-2 = {2 * n - 2}")
