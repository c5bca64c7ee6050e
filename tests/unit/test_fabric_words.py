"""A fabric is described in the words of the backend its ranks run: compare on gloo said the default fabric
was "NCCL as configured: NVLink or PCIe P2P where possible" over two CPU processes."""

import pytest

from fabricbench.fabrics import get_fabric


def test_the_default_fabric_on_gloo_names_no_nccl_transport():
    fab = get_fabric("default")
    on_gloo = fab.described("gloo")
    assert "gloo" in on_gloo and not any(w in on_gloo for w in ("NVLink", "P2P", "NCCL"))
    assert fab.described("nccl") == fab.described(None) == fab.description  # GPUs keep NCCL's words


@pytest.mark.parametrize("name", ["p2p-off", "shaped:1gbit"])
def test_other_fabrics_keep_their_words(name):
    fab = get_fabric(name)
    assert fab.described("gloo") == fab.description
