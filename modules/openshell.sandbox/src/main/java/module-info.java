/**
 * The sandbox runtime ({@code openshell-sandbox}): a program that runs inside the workload's
 * execution environment as PID 1 or a child subreaper, owns the workload's process tree, and is
 * the workload's only way out. Every outbound TCP {@code connect()} and DNS query of a workload
 * process is intercepted by seccomp user notification, attributed to the binary that made it while
 * the caller is blocked, and held until the supervisor decides (DESIGN §1, §5).
 *
 * <p>It exports nothing. The Sandbox Protocol side (gRPC, TLS, JWT) is added by an adapter over
 * the runtime's internal interfaces; the broker already implements the isolation contract's
 * {@code NetworkMediationSource}.
 *
 * <h2>Limits</h2>
 * <table>
 * <caption>Bounds and what happens at them</caption>
 * <tr><th>Constant</th><th>Value</th><th>At the bound</th></tr>
 * <tr><td>{@code NetworkBroker.MAX_PENDING_DECISIONS}</td><td>256</td><td>the next connect fails with EAGAIN</td></tr>
 * <tr><td>{@code NetworkBroker.DECISION_WAIT}</td><td>30 s</td><td>the connect fails with ETIMEDOUT</td></tr>
 * <tr><td>{@code NetworkBroker.MAX_RELAYS}</td><td>1024 open relayed connections</td><td>an allow fails the connect with EAGAIN</td></tr>
 * <tr><td>{@code NetworkBroker.RELAY_ACCEPT_WAIT}</td><td>10 s</td><td>the relay is abandoned (the socket is reset)</td></tr>
 * <tr><td>{@code NetworkBroker.MAX_PENDING_DNS}</td><td>256 queries</td><td>the query is dropped; the resolver retries</td></tr>
 * <tr><td>{@code NetworkBroker.MAX_SENDMMSG_VECTOR}</td><td>1024 (UIO_MAXIOV)</td><td>the kernel sends no more in one call</td></tr>
 * <tr><td>{@code NetworkBroker.MAX_DNS_ASKERS}</td><td>1024 local ports</td><td>the least recently used attribution is forgotten; its queries arrive Unresolved</td></tr>
 * <tr><td>{@code NetworkBroker.MAX_HELD_SOCKETS}</td><td>1024 sockets</td><td>where pidfd_getfd is refused: the oldest held socket is let go; its later connect is refused (EACCES), or continued if it stays on loopback</td></tr>
 * <tr><td>{@code NetworkBroker.HELD_SOCKET_WAIT}</td><td>10 s</td><td>as above, for a socket not connected within it</td></tr>
 * <tr><td>{@code Enclosure.PidNamespace.KILL_ROUNDS}</td><td>64</td><td>one process's tree is killed in at most that many rounds; a descendant forked in every round survives until the workload ends</td></tr>
 * <tr><td>{@code NetworkBroker.MAX_MEDIATED_PEERS}</td><td>2048 sockets</td><td>the least recently used is forgotten; its getpeername shows its loopback relay</td></tr>
 * <tr><td>{@code IdentityCapture.MAX_CACHED_DIGESTS}</td><td>1024</td><td>the least recently used digest is forgotten</td></tr>
 * <tr><td>{@code IdentityCapture.CTIME_SETTLE}</td><td>2 s</td><td>a file changed more recently is hashed on every capture, not cached</td></tr>
 * <tr><td>{@code IdentityCapture.MAX_HASHED_BYTES}</td><td>1 GiB</td><td>the executable gets no digest</td></tr>
 * <tr><td>{@code DnsRelay.MAX_TCP_CLIENTS}</td><td>64</td><td>further TCP resolver connections are closed</td></tr>
 * <tr><td>{@code DnsRelay.TCP_IDLE_MILLIS}</td><td>10 s</td><td>an idle TCP resolver connection is closed</td></tr>
 * <tr><td>{@code WorkloadProcess.OUTPUT_DRAIN_WAIT}</td><td>10 s</td><td>the exit status is reported without waiting longer for output EOF (a tree the runtime kills is not waited for at all)</td></tr>
 * <tr><td>{@code ProcessTree.LAUNCH_WAIT}</td><td>60 s per launcher step</td><td>the launch fails, the launcher is killed</td></tr>
 * <tr><td>{@code ProcessTree.KILL_WAIT}</td><td>10 s</td><td>terminate returns while the cgroup still empties</td></tr>
 * <tr><td>{@code TrustStoreView.MAX_SYSTEM_BUNDLE_BYTES}</td><td>8 MiB</td><td>startAgent fails FAILED, no agent starts</td></tr>
 * <tr><td>{@code WorkloadTrust.MAX_PEM_BYTES} (isolation)</td><td>16 KiB of interception CA PEM</td><td>startAgent fails INVALID</td></tr>
 * <tr><td>{@code SandboxRuntime.MAX_PROCESSES}</td><td>1024 retained process handles</td><td>the new process is killed, UNAVAILABLE</td></tr>
 * <tr><td>{@code LaunchBundles.MAX_BUNDLE_BYTES}</td><td>1 MiB</td><td>exit 64, nothing served</td></tr>
 * <tr><td>{@code SandboxMain.FIRST_CONTACT_WAIT}</td><td>60 s</td><td>no supervisor came: workload terminated, exit 75</td></tr>
 * <tr><td>{@code SandboxMain.SUPERVISOR_LOSS_GRACE}</td><td>30 s without supervision (a link whose PendingConnections stream is taken)</td><td>workload terminated, exit 75 (after {@code ENDED_LINGER} if a link still reads statuses)</td></tr>
 * <tr><td>{@code SandboxMain.ENDED_LINGER}</td><td>30 s</td><td>after the boundary ended, the runtime exits even if the supervisor stays</td></tr>
 * <tr><td>{@code SandboxMain.WATCH_INTERVAL}</td><td>200 ms</td><td>how late the main notices an end or a loss</td></tr>
 * <tr><td>{@code ProcessTree.REAP_RETRY} .. {@code REAP_INTERVAL}</td><td>20 ms doubling to 200 ms</td><td>while an ended child is one of our launches (its watcher reaps it), the orphan reaper looks again after this; otherwise it blocks in {@code waitid} and makes no wake-ups</td></tr>
 * <tr><td>{@code HandoffChannel.POLL}</td><td>5 s</td><td>the lane reader's wait between looks at whether the lane closed (a close shuts the socket down, which wakes it at once)</td></tr>
 * <tr><td>{@code StartupProbes.PROBE_WAIT}</td><td>10 s per probe step</td><td>the probe fails; exit 70</td></tr>
 * <tr><td>{@code StaticConfinement.MAX_ACCOUNT_FILE_BYTES}</td><td>4 MiB of the workload's passwd or group</td><td>a named run_as refuses to serve, exit 70</td></tr>
 * <tr><td>{@code StaticConfinement.MAX_DESCRIPTION_CHARS}</td><td>4096 characters of the confinement's status line</td><td>cut, ending in "..."</td></tr>
 * <tr><td>{@code WorkloadConfinement.MAX_PATHS} (protocol)</td><td>256 Landlock paths</td><td>the bundle is refused, exit 64</td></tr>
 * <tr><td>{@code ControlThreads.MAX_CONTROL_THREADS}</td><td>256 control operations at once</td><td>the next is refused UNAVAILABLE without running (not recorded: retry with the same id)</td></tr>
 * <tr><td>{@code RuntimeService.MAX_WAIT_CALL}</td><td>1 h</td><td>a Wait call answers without an exit (still running);
 *     a shorter {@code max_wait_millis} of the request bounds it instead, so a caller's wait never holds a
 *     control thread past the caller's own deadline</td></tr>
 * <tr><td>{@code RuntimeService.MAX_CHUNK_BYTES}</td><td>16 KiB ({@code CreditedStream.MAX_CHUNK_BYTES})</td><td>process output and relay bytes are split into messages of at most this</td></tr>
 * <tr><td>{@code RuntimeService.MEDIATION_POLL}</td><td>500 ms</td><td>the longest a mediation stream takes to notice its call was cancelled (so the longest egress outlives a dropped link)</td></tr>
 * <tr><td>{@code OutputJournal.MAX_RETAINED_BYTES}</td><td>1 MiB per stream of the agent (in 16 KiB {@code BLOCK_BYTES})</td><td>with nobody attached the oldest block goes and the next attach gets an OutputLost; an attached reader that is behind holds the agent back instead</td></tr>
 * <tr><td>{@code RuntimeService.EXIT_SLICE}</td><td>1 s</td><td>how late an attach whose client went lets the process be attached again</td></tr>
 * <tr><td>{@code RuntimeService.MAX_UNCLAIMED_FORWARDS}</td><td>64</td><td>a further PortForward is refused UNAVAILABLE</td></tr>
 * <tr><td>{@code RuntimeService.FORWARD_CLAIM_WAIT}</td><td>30 s</td><td>a port-forward connection no Relay stream claimed is closed</td></tr>
 * <tr><td>{@code SandboxRuntime.PORT_FORWARD_CONNECT_WAIT}</td><td>10 s</td><td>the PortForward fails FAILED</td></tr>
 * <tr><td>{@code SandboxRuntime.MAX_PROVIDER_VARIABLES}</td><td>64</td><td>the update is refused whole (INVALID)</td></tr>
 * <tr><td>{@code SandboxRuntime.MAX_PROVIDER_VARIABLE_CHARS}</td><td>4,096 per name or value</td><td>the update is refused whole (INVALID)</td></tr>
 * </table>
 *
 * <h2>Workload trust</h2>
 * StartAgent may carry the supervisor's per-sandbox interception CA ({@code workload_trust_pem}).
 * Before the agent exists, {@code TrustStoreView} writes, for each common CA bundle path that
 * exists, the workload's bundle plus that CA into the runtime's private directory and bind-mounts
 * it read-only over the path in the runtime's own mount namespace (private propagation: the host
 * never sees it), and the agent and every exec get {@code SSL_CERT_FILE}, {@code CURL_CA_BUNDLE},
 * {@code REQUESTS_CA_BUNDLE} and {@code NODE_EXTRA_CA_CERTS} unless they set them. Java reads
 * neither, so each distinct Java keystore (the distributions' shared {@code cacerts} and each
 * JDK's own under {@code /usr/lib/jvm}, {@code /opt/java}, {@code /usr/java}; at most
 * {@code TrustStoreView.MAX_JAVA_KEYSTORES}) is covered the same way by a PKCS12 copy with the CA
 * added, which loads with any password. No bundle path, or any failure, fails startAgent: no agent
 * runs without the CA it was promised.
 *
 * <h2>Binary digests</h2>
 * The runtime is root of the sandbox's user namespace and could read any file of a mapped owner;
 * it hashes an executable only if its permission bits alone let it read it, so a binary its
 * owner made execute-only (0711) gets a path and no digest, as a conformance check requires, and
 * a policy that pins a digest denies it.
 *
 * <h2>IPv6 sockets</h2>
 * Dual-stack IPv6 sockets (every JVM's, for IPv4 destinations too, as {@code ::ffff:a.b.c.d}) are
 * decided as the IPv4 destination and connected to an IPv4 relay through its mapped address;
 * an IPv6-only socket gets a relay on {@code ::1}. A relay that cannot be made answers the blocked
 * connect ECONNREFUSED: a connect is never left waiting.
 *
 * <h2>Protocol adapter</h2>
 * {@code RuntimeService} serves the Sandbox Protocol ({@code openshell.protocol}, a friend export)
 * over {@code RuntimeControl}: control calls through the generation's ledger, a
 * {@code BackendException} as a gRPC status led by its kind, process I/O on AttachProcess
 * (exit sent after stdout and stderr drained), each pending connect announced on
 * PendingConnections and decided on its own Relay stream, DNS on the Dns stream. At most one
 * PendingConnections and one Dns stream at a time; announced but undecided connects are denied
 * MEDIATION_UNAVAILABLE when their stream ends. Relay and process streams run under the
 * protocol's message credits ({@code CreditedStream}: at most 31 unacknowledged 16 KiB messages
 * per direction): writes to a workload's socket or stdin happen on the stream's own thread, so a
 * workload that stops reading stalls only its own relay, never control calls, DNS or other
 * relays. A relay completes once both sides sent half_close. Over a Unix link the announcer
 * also connects the supervisor's descriptor lane ({@code HandoffChannel}, framing in
 * {@code openshell.protocol.DescriptorLane}) and announces each connect with a random token; a
 * decision that allows with {@code handoff} gets the loopback end of the workload's relay passed
 * over the lane instead, and its stream ends: the runtime keeps nothing of the connection (and
 * still has no egress of its own). When the supervisor's PendingConnections request carries a
 * lane key, the announcer presents it on the lane and announces TCP connects there (an
 * announcement over 16 KiB still goes on the stream); their denials and hand-offs come back on
 * the lane, two datagrams per connect instead of a Relay stream. A lane that ends or carries
 * anything but a well-formed decision ends the announcer, so its connects fail closed
 * (MEDIATION_UNAVAILABLE) and the supervisor takes the stream again.
 *
 * <h2>Threads</h2>
 * Anything that blocks in a native call (JNA: pidfd and pipe polls, pipe reads and writes) runs
 * on a platform thread. On a virtual thread such a call pins its carrier, and the scheduler has
 * only as many carriers as cores: two live workload processes once froze every virtual thread of
 * the runtime, protocol streams and the broker's pending connects included.
 *
 * <h2>Startup</h2>
 * {@code SandboxMain}: non-dumpable, RLIMIT_CORE 0, the launch bundle read from standard input
 * (then closed), {@code lo} up, then {@code StartupProbes}: a real seccomp notification with a
 * task-memory read and an ADDFD (EBUSY there means a nested sandbox, reported as such), the
 * Landlock ABI, only {@code lo} in the network namespace, and direct connections out that fail;
 * then the resolver view ({@code /etc/resolv.conf} naming only 127.0.0.53, bind-mounted
 * read-only in the runtime's own mount namespace) and the DNS relay. Then it dials the
 * supervisor's channel with the runtime bundle's TLS identity and token key
 * ({@code LaunchBundles}), serves {@code RuntimeService}, prints one JSON line with
 * {@code "serving":true}, and exits 0 when the boundary has ended and the supervisor left (or
 * after {@code ENDED_LINGER}). Workload processes run as the policy's static sections say, resolved
 * once before the first ({@code StaticConfinement}: the user and group, names from the workload's
 * own passwd and group; Landlock over the policy's lists, or without a filesystem section the
 * {@code WorkloadLaunch.READ_ONLY} host directories with the workspace writable; a hard requirement
 * the kernel cannot meet refuses to serve, naming it) in a cgroup v2 leaf
 * under the runtime's own (delegated) cgroup, each process (the agent, every exec) in a leaf of
 * its own below it: terminating a process kills its leaf (it and everything it started, double
 * forks included) and nothing else; terminating the boundary kills the workload's leaf.
 *
 * <h2>Supervisor loss</h2>
 * Supervision is a link whose PendingConnections stream is taken. When that stream ends (the
 * supervisor closed its mediation, or the link dropped: noticed within {@code MEDIATION_POLL}),
 * egress stops at once: held connects get ECANCELED, every open relay is closed, new connects are
 * denied ECANCELED and DNS queries dropped, until a supervisor takes the stream again; the runtime
 * keeps redialing. After {@code SandboxMain.SUPERVISOR_LOSS_GRACE} (30 s) without supervision, or
 * {@code SandboxMain.FIRST_CONTACT_WAIT} (60 s) without a first one, every workload process is
 * terminated and the runtime exits 75 (a link still open may read the statuses for
 * {@code ENDED_LINGER} first).
 *
 * <h2>Port forwards</h2>
 * PortForward connects to {@code 127.0.0.1:port} inside the workload's network namespace at once
 * (nothing listening: FAILED) and parks the connection under a fresh id; the supervisor claims it
 * with a Relay stream whose first message allows that id, and bytes flow as on any relay.
 */
module openshell.sandbox {
    requires openshell.isolation;
    requires openshell.linux;
    requires com.sun.jna;
    requires openshell.protocol;
    requires io.grpc;
    requires io.grpc.stub;
    requires com.google.protobuf;
    requires jakarta.json;
}
