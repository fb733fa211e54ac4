# Runs inside a sandbox and tries to reach another sandbox ("the other") every way the isolation
# tests name; prints one JSON object: for each attempt "ok: ..." or the errno name it failed with.
import errno
import json
import os
import random
import socket
import struct
import sys
import time

other = json.loads(sys.argv[1])
result = {}


def attempt(name, action):
    try:
        result[name] = "ok: " + str(action())
    except OSError as e:
        result[name] = errno.errorcode.get(e.errno, str(e.errno)) if e.errno else type(e).__name__ + ": " + str(e)
    except Exception as e:
        result[name] = type(e).__name__ + ": " + str(e)


def cmdlines():
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open("/proc/" + p + "/cmdline", "rb") as f:
                    out.append(p + " " + f.read().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                pass
    return out


def read(path):
    with open(path, "rb") as f:
        return f.read(64)


def unix(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    try:
        s.connect(path)
        return "connected"
    finally:
        s.close()


def tcp(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(10)
    try:
        s.connect(("127.0.0.1", port))
        return s.recv(64).decode()
    finally:
        s.close()


def dns(name):
    query_id = random.randrange(65536)
    question = b"".join(bytes([len(label)]) + label.encode() for label in name.split(".")) + b"\0"
    packet = struct.pack(">HHHHHH", query_id, 0x0100, 1, 0, 0, 0) + question + struct.pack(">HH", 1, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(10)
    try:
        s.sendto(packet, ("127.0.0.53", 53))
        answer = s.recv(512)
        return "rcode " + str(answer[3] & 0x0F) + " answers " + str(struct.unpack(">H", answer[6:8])[0])
    finally:
        s.close()


result["cmdlines"] = cmdlines()
result["netns"] = os.readlink("/proc/self/ns/net")
def signal_marked(marker):
    for line in cmdlines():
        pid, _, cmd = line.partition(" ")
        if marker in cmd and "probe.py" not in cmd:
            os.kill(int(pid), 0)
            return "signalled pid " + pid
    return "no such process in /proc"


def signal_own_child():
    child = os.fork()
    if child == 0:
        time.sleep(30)
        os._exit(0)
    try:
        os.kill(child, 0)
        return "signalled own child"
    finally:
        os.kill(child, 9)
        os.waitpid(child, 0)


attempt("signalOwnChild", signal_own_child)
attempt("signalByName", lambda: signal_marked(other["marker"]))
attempt("proc", lambda: read("/proc/" + str(other["pid"]) + "/cmdline"))
attempt("kill", lambda: os.kill(other["pid"], 0))
attempt("workspaceFile", lambda: read(other["workspaceFile"]))
attempt("workspaceList", lambda: os.listdir(other["workspace"]))
attempt("stateFile", lambda: read(other["stateFile"]))
attempt("runtimeSocket", lambda: unix(other["socket"]))
attempt("listener", lambda: tcp(other["port"]))
attempt("dns", lambda: dns(other["dnsName"]))
print(json.dumps(result))
