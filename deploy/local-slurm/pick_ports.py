#!/usr/bin/env python3
"""pick_ports.py COUNT HOST [TAKEN_FILE]: prints COUNT free TCP ports for the
local cluster's daemons, separated by spaces.

They are picked below the kernel's ephemeral range (32768+), so outgoing
connections (srun, slurmd replies) cannot grab them between now and the
daemons binding, and each is kept bound while the rest are chosen, so no
port is returned twice. TAKEN_FILE (KEY=PORT lines, e.g. DIR/etc/ports)
names ports already given to this cluster's other daemons."""
import random
import socket
import sys

count, host = int(sys.argv[1]), sys.argv[2]
taken = set()
if len(sys.argv) > 3:
    taken = {int(line.split("=")[1]) for line in open(sys.argv[3]) if "=" in line}
chosen, socks = [], []
while len(chosen) < count:
    port = random.randint(20000, 32000)
    if port in chosen or port in taken:
        continue
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((host, port))
    except OSError:
        s.close()
        continue
    socks.append(s)  # keep bound so the next pick cannot return it
    chosen.append(port)
print(*chosen)
