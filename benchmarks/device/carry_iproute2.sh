#!/usr/bin/env bash
# Builds .carry/iproute2 (ignored by git) for the GPU machine, which has no `ip` or `tc`: Debian's iproute2
# and the libraries it links, unpacked into .carry/iproute2-root, plus .carry/iproute2/bin/{ip,tc}
# wrappers that hand the libraries to the loader (--library-path) instead of LD_LIBRARY_PATH, so that the
# programs `ip netns exec` starts (python, torch) keep the machine's own libraries. Symbolic links are
# replaced by copies: the device tool carries a link only as a link.
#   bash benchmarks/device/carry_iproute2.sh            (here, as root, with apt); then run(..., carry=[".carry"])
set -euo pipefail
cd "$(dirname "$0")/../.."
root=.carry/iproute2-root
rm -rf "$root" .carry/iproute2 && mkdir -p "$root" .carry/iproute2/bin /tmp/fb-debs
(cd /tmp/fb-debs && apt-get download iproute2 libmnl0 libelf1 libbpf1 libcap2 libbsd0 libxtables12 libdb5.3 \
  libtirpc3 libmd0 zlib1g libzstd1)
for f in /tmp/fb-debs/*.deb; do dpkg -x "$f" "$root"; done
find "$root" -type l | while read -r l; do t=$(readlink -f "$l"); rm "$l"; [ -e "$t" ] && cp "$t" "$l" || true; done
for b in ip tc; do
  cat > ".carry/iproute2/bin/$b" <<W
#!/bin/sh
R=\$(cd "\$(dirname "\$0")/../../iproute2-root" && pwd)
exec /lib64/ld-linux-x86-64.so.2 --library-path "\$R/lib/x86_64-linux-gnu:\$R/usr/lib/x86_64-linux-gnu" "\$R/sbin/$b" "\$@"
W
  chmod +x ".carry/iproute2/bin/$b"
done
.carry/iproute2/bin/ip -V && .carry/iproute2/bin/tc -V
