# Bypass attempts that need threads or exec, run as a workload process of a real sandbox; each
# prints "name outcome". argv: the upstream's IPv4 address (its alias's stand-in) and port (python3 is
# not allowed there).
import errno, os, socket, sys, threading

host, port = sys.argv[1], int(sys.argv[2])


def name(e):
    return errno.errorcode.get(e.errno, str(e.errno))


def blocked_in_connect(tid):
    # Waits until the thread is inside connect(2) (syscall 42), without sleeping as synchronization.
    # A thread already gone (its connect was decided first) ends the wait too.
    while True:
        try:
            if open('/proc/self/task/%d/syscall' % tid).read().split()[0] == '42':
                return
        except FileNotFoundError:
            return
        except (OSError, IndexError):
            pass
        os.sched_yield()


# dup2 games: while one thread is blocked in connect, another socket is moved onto its number.
s = socket.socket()
other = socket.socket()
result = {}


def go():
    try:
        s.connect((host, port))
        result['connect'] = 'SUCCEEDED'
    except OSError as e:
        result['connect'] = name(e)


t = threading.Thread(target=go)
t.start()
blocked_in_connect(t.native_id)
os.dup2(other.fileno(), s.fileno())
t.join()
print('dup2-during-connect', result['connect'], flush=True)
try:
    s.send(b'through-the-swap\n')
    print('dup2-send', 'SUCCEEDED', flush=True)
except OSError as e:
    print('dup2-send', name(e), flush=True)

# The runtime's own listeners: anything listening on TCP in the sandbox but the DNS relay.
found = []
for table, family in (('/proc/net/tcp', socket.AF_INET), ('/proc/net/tcp6', socket.AF_INET6)):
    try:
        lines = open(table).read().splitlines()[1:]
    except OSError:
        continue
    for line in lines:
        fields = line.split()
        if fields[3] != '0A':
            continue
        local_port = int(fields[1].split(':')[1], 16)
        address = '127.0.0.1' if family == socket.AF_INET else '::1'
        if fields[1].startswith('3500007F:'):
            continue  # 127.0.0.53, the DNS relay: the workload's resolver, by design
        c = socket.socket(family)
        try:
            c.connect((address, local_port))
            found.append('%d:SUCCEEDED' % local_port)
        except OSError as e:
            found.append('%d:%s' % (local_port, name(e)))
print('runtime-listeners', ','.join(found) if found else 'NONE', flush=True)

# Changing identity between connect and decision: a thread blocks in connect, the process
# execs another program meanwhile. The exec replaces the caller; nothing may be relayed.
sys.stdout.flush()
pid = os.fork()
if pid == 0:
    def swap():
        try:
            socket.socket().connect((host, port))
        except OSError:
            pass
    t = threading.Thread(target=swap)
    t.start()
    blocked_in_connect(t.native_id)
    os.execv('/bin/echo', ['echo', 'exec-during-connect', 'REPLACED'])
_, status = os.waitpid(pid, 0)
print('exec-during-connect-status', os.waitstatus_to_exitcode(status), flush=True)

# The supervisor's sockets beside the runtime: the link and the descriptor lane the runtime
# hands relay sockets over. Their directory belongs to the sandbox's mapped root, not to us.
channel = None
for p in os.listdir('/proc'):
    if not p.isdigit():
        continue
    try:
        args = open('/proc/%s/cmdline' % p, 'rb').read().split(b'\0')
    except OSError:
        continue
    if b'--channel' in args and any(b'SandboxMain' in a for a in args):
        channel = args[args.index(b'--channel') + 1].decode()
        break
for label, path, kind in (('link-socket', channel, socket.SOCK_STREAM),
                          ('descriptor-channel', channel and channel + '.fds', socket.SOCK_SEQPACKET)):
    if path is None:
        print(label, 'NO-PATH', flush=True)
        continue
    c = socket.socket(socket.AF_UNIX, kind)
    try:
        c.connect(path)
        print(label, 'SUCCEEDED', flush=True)
    except OSError as e:
        print(label, name(e), flush=True)
    finally:
        c.close()

# A resolver's random source port: bind(0.0.0.0:0) works, and the runtime binds it to loopback,
# never to a wider address (a fixed port on the wildcard stays refused: bind-wildcard in escape.c).
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    u.bind(('0.0.0.0', 0))
    print('bind-unspecified-port-0', u.getsockname()[0], flush=True)
except OSError as e:
    print('bind-unspecified-port-0', name(e), flush=True)
