"""The NVLink graph's search, on bit sets: components, maximal cliques (exact or greedy), grown cliques.

    fabricbench topo --topo-file nvl72.txt      (islands and best sets of a 72-GPU rack in well under a second)

Positions are 0..n-1 (the order of a Topology's GPUs); adj[p] is the bit set of positions p reaches.
Enumerating every maximal clique is exponential, so only a small irregular component gets it
(Bron-Kerbosch); a large one gets one clique greedily grown from each GPU not yet covered. best_set's
search beyond the exhaustive range compares the prefixes of cliques grown from each seed (grow_cliques).
Timings: benchmarks/topology/scaling.py.
"""

from __future__ import annotations


def bits(mask: int) -> list[int]:
    """Positions of the set bits, lowest first."""
    return [i for i, c in enumerate(bin(mask)[:1:-1]) if c == "1"]


def components(adj: list[int]) -> list[int]:
    """Connected components as bit sets, in order of their lowest position."""
    seen, out = 0, []
    for p in range(len(adj)):
        if seen >> p & 1:
            continue
        comp, frontier = 1 << p, 1 << p
        while frontier:
            nxt = 0
            for q in bits(frontier):
                nxt |= adj[q]
            frontier = nxt & ~comp
            comp |= nxt
        seen |= comp
        out.append(comp)
    return out


def component_seeds(adj: list[int]) -> list[int]:
    """One seed per component (its lowest position): enough for a graph of cliques, linear in size."""
    return [bits(c)[0] for c in components(adj)]


def bron_kerbosch(adj: list[int], comp: int) -> list[list[int]]:
    """Every maximal clique inside the component `comp` (bit sets), Bron-Kerbosch with pivoting."""
    found: list[list[int]] = []

    def grow(r: int, p: int, x: int) -> None:
        if not p and not x:
            found.append(bits(r))
            return
        pivot = max(bits(p | x), key=lambda v: bin(adj[v] & p).count("1"))
        for v in bits(p & ~adj[pivot]):
            grow(r | (1 << v), p & adj[v], x & adj[v])
            p &= ~(1 << v)
            x |= 1 << v

    grow(0, comp, 0)
    return found


def greedy_cliques(adj: list[int], comp: int) -> list[list[int]]:
    """Maximal cliques covering every GPU of a large irregular component, in O(n^2) bit-set steps each:
    from each GPU no clique holds yet, add the candidate with the most neighbours among the candidates."""
    found: list[list[int]] = []
    covered = 0
    for seed in bits(comp):
        if covered >> seed & 1:
            continue
        clique, cand = 1 << seed, adj[seed] & comp
        while cand:
            v = max(bits(cand), key=lambda q: (bin(adj[q] & cand).count("1"), -q))
            clique |= 1 << v
            cand &= adj[v]
        covered |= clique
        found.append(bits(clique))
    return found


def grow_cliques(rank: list[list[int]], r: int, seeds: list[int]) -> list[tuple[list[int], list[int], list[int]]]:
    """Cliques of links of rank <= r (rank[p][q]: the link between positions p and q as an integer, best 0),
    grown from each seed: (positions in the order added, the sum and the worst of the pair ranks of each
    prefix). Each step adds the position joined to every one chosen by rank <= r with the smallest sum of
    ranks to them (lowest position on a tie); prefixes are best_set's candidates."""
    n = len(rank)
    out = []
    for seed in seeds:
        order, sums, worst = [seed], [0], [-1]
        rs = rank[seed]
        cand = [q for q in range(n) if q != seed and rs[q] <= r]  # ascending: min() breaks ties low
        dist = list(rs)  # sum of ranks from each candidate to the chosen ones
        far = list(rs)  # worst rank from each candidate to the chosen ones
        while cand:
            v = min(cand, key=dist.__getitem__)
            sums.append(sums[-1] + dist[v])
            worst.append(max(worst[-1], far[v]))
            order.append(v)
            rv = rank[v]
            cand = [q for q in cand if q != v and rv[q] <= r]
            for q in cand:
                dist[q] += rv[q]
                if rv[q] > far[q]:
                    far[q] = rv[q]
        out.append((order, sums, worst))
    return out
