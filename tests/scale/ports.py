"""Free loopback ports for the scale tests, which start servers of their own."""
import socket


def free_port():
    """A port nothing listens on now (the kernel's pick)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def free_port_block(n):
    """A base port whose next n ports are free too (replicas use base+1..base+n)."""
    for _ in range(200):
        base = free_port()
        if base + n > 65535:
            continue
        ok = True
        for p in range(base, base + n + 1):
            t = socket.socket()
            try:
                t.bind(("127.0.0.1", p))
            except OSError:
                ok = False
            finally:
                t.close()
        if ok:
            return base
    raise RuntimeError("no block of free ports")
