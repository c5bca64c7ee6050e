"""Several nodes: which node this process is on, and an emulated cluster to try multi-node runs on one machine.

    from fabricbench.cluster import lab
    with lab.cluster(2, rate="1gbit") as nodes:        # two network namespaces, a shaped link between them
        p = nodes[1].popen(["python", "-m", "fabricbench", "train", "--nnodes", "2", "--node-rank", "1", ...])

- lab.py: the emulated multi-node lab (network namespaces joined through a switch namespace by veth pairs
  shaped with tc, a private hostname per node); the multinode test tier runs on it.
"""
