"""A TCP port on 127.0.0.1 that nothing listens on: the OS's choice, freed
at once (for a program that takes a port number, or for a refused
connection)."""
import socket


def unused_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
