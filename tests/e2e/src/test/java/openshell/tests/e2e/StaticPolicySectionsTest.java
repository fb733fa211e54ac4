package openshell.tests.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import jakarta.json.JsonObject;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The policy's static sections decide what the agent and every exec get, through the whole real
 * path: {@code policy check}-valid YAML admitted by a real gateway, sealed into the launch, applied
 * by the process driver's runtime to every workload process. Per field: {@code process.run_as_user}
 * and {@code run_as_group} (numbers, names from the workload's own passwd/group, ids the driver
 * cannot map refused), {@code filesystem_policy.read_only}, {@code read_write} and
 * {@code include_workdir} (a listed write succeeds, an unlisted one is EACCES where the file
 * modes alone would allow it), and {@code landlock.compatibility} on a kernel without Landlock
 * (the runtime under a seccomp filter that makes every Landlock call ENOSYS, as on a kernel built
 * without it): a hard requirement refuses the create by name, best effort runs and says so in the
 * sandbox's status and the supervisor's audit.
 */
class StaticPolicySectionsTest {
    /** The policy's user and group: not the default 1000, inside the process driver's 0-65535. */
    static final int RUN_AS_USER = 4321;
    static final int RUN_AS_GROUP = 4322;
    /** A uid no process-driver sandbox maps (each maps 0-65535). */
    static final int UNMAPPABLE_USER = 70_000;
    /** A host account (Debian base-passwd): name, uid and primary gid. */
    static final String NAMED_USER = "games";
    static final int NAMED_UID = 5;
    static final int NAMED_GID = 60;
    /** Longest wait for gcc to build the no-Landlock wrapper. */
    static final Duration COMPILE_WAIT = Duration.ofSeconds(120);
    /** Longest wait for a best-effort sandbox's degraded control to reach its supervisor's audit. */
    static final Duration AUDIT_WAIT = Duration.ofSeconds(60);

    @TempDir
    Path tmp;

    private GatewayUnderTest gateway;
    private final List<Path> hostFiles = new ArrayList<>();

    @AfterEach
    void cleanUp() throws Exception {
        if (gateway != null && Files.exists(gateway.state.resolve("gateway.json"))) {
            for (String name : List.of("fields", "workdir", "named", "best")) {
                gateway.cli("sandbox", "delete", name);
            }
            gateway.stopQuietly();
        }
        for (Path p : hostFiles) {
            Files.deleteIfExists(p);
        }
    }

    private void startGateway(Map<String, String> env) throws Exception {
        requireRoot();
        gateway = new GatewayUnderTest(tmp.resolve("home"), env);
        gateway.start(0);
    }

    private static void requireRoot() {
        if (!"root".equals(System.getProperty("user.name"))) {
            fail("this test needs root: the process driver maps a private uid range for each sandbox");
        }
    }

    /**
     * A directory every sandbox uid may write by its mode, so only Landlock can deny a write: in
     * the build's own directory (traversable, like the launchers), never under /tmp or /var/tmp,
     * which the policies below list read-write.
     */
    private Path openWorkspace(String name) throws Exception {
        Path base = Path.of(System.getProperty("openshell.e2e.launchers")).toAbsolutePath().getParent()
                .resolve("static-policy");
        Files.createDirectories(base);
        Files.setPosixFilePermissions(base, PosixFilePermissions.fromString("rwx--x--x"));
        Path w = base.resolve(name + "-" + Long.toHexString(System.nanoTime()));
        Files.createDirectory(w);
        Files.setPosixFilePermissions(w, PosixFilePermissions.fromString("rwxrwxrwx"));
        return w;
    }

    private Cli.Result create(String name, String policy, Path workspace, String... agent) throws Exception {
        Path file = Files.writeString(tmp.resolve(name + ".yaml"), policy);
        Cli.Result check = gateway.cli("policy", "check", "--policy", file.toString());
        assertEquals(0, check.exit(), "the policy is valid: " + check.out() + check.err());
        List<String> args = new ArrayList<>(List.of("sandbox", "create", "--policy", file.toString(), "--name", name));
        if (workspace != null) {
            args.addAll(List.of("--workspace", workspace.toString()));
        }
        args.add("--");
        args.addAll(List.of(agent));
        return gateway.cli(args.toArray(String[]::new));
    }

    private Cli.Result sh(String sandbox, String script) throws Exception {
        return gateway.cli("sandbox", "exec", sandbox, "--", "/bin/sh", "-c", script);
    }

    /** A host path the sandbox writes (its /tmp is the host's), removed after the test. */
    private Path hostFile(String name) {
        Path p = Path.of(name);
        hostFiles.add(p);
        return p;
    }

    @Test
    void theStaticSectionsDecideTheUserAndEveryWriteOfTheAgentAndEveryExec() throws Exception {
        startGateway(Launchers.environment());
        String marker = "osp-" + Long.toHexString(System.nanoTime());
        Path workspace = openWorkspace("ws-fields");
        Path readOnlyDir = openWorkspace("ro-fields");
        Files.writeString(readOnlyDir.resolve("readable"), "r\n");
        Path agentUid = hostFile("/tmp/" + marker + ".agent-uid");
        Path agentDenied = hostFile("/tmp/" + marker + ".agent-denied");
        Path tmpFile = hostFile("/tmp/" + marker + ".tmp");
        Path varTmpFile = hostFile("/var/tmp/" + marker + ".var-tmp");
        Path shmFile = hostFile("/dev/shm/" + marker);
        if (!Files.isDirectory(Path.of("/dev/shm")) || !Files.isDirectory(Path.of("/var/tmp"))) {
            fail("this host has no /dev/shm or /var/tmp: the test writes where file modes allow everyone");
        }
        String policy = """
                version: 1
                filesystem_policy:
                  read_only: [/usr, /lib, /lib64, /bin, /sbin, /etc, %s]
                  read_write: [/tmp, /var/tmp]
                  include_workdir: false
                landlock:
                  compatibility: hard_requirement
                process:
                  run_as_user: %d
                  run_as_group: %d
                """.formatted(readOnlyDir, RUN_AS_USER, RUN_AS_GROUP);
        // The agent itself: its uid, and a write to the (mode 0777) workspace that no list allows.
        Cli.Result created = create("fields", policy, workspace, "/bin/sh", "-c",
                "id -u > " + agentUid + "; (echo x > " + workspace + "/agent-wrote) 2> " + agentDenied + "; exec /bin/sleep 600");
        assertEquals(0, created.exit(), created.out() + created.err() + gateway.diagnostics());

        Cli.Result id = sh("fields", "id -u; id -g; id -G");
        assertEquals(0, id.exit(), id.err() + gateway.diagnostics());
        assertEquals(RUN_AS_USER + "\n" + RUN_AS_GROUP + "\n" + RUN_AS_GROUP + "\n", id.out(), "process.run_as_user/run_as_group");
        awaitFile(agentUid);
        assertEquals(RUN_AS_USER + "", Files.readString(agentUid).strip(), "the agent runs as the policy's user too");

        Cli.Result listed = sh("fields", "echo t > " + tmpFile + " && echo v > " + varTmpFile + " && echo written");
        assertEquals(0, listed.exit(), "read_write [/tmp, /var/tmp]: " + listed.err() + gateway.diagnostics());
        assertEquals("written\n", listed.out());
        assertEquals("t", Files.readString(tmpFile).strip());
        assertEquals("v", Files.readString(varTmpFile).strip());
        // The sandbox's uid, as the host sees it: in the sandbox's own range, never the host's 4321.
        int hostUid = (Integer) Files.getAttribute(tmpFile, "unix:uid");
        assertTrue(hostUid >= 1_000_000_000 && (hostUid - 1_000_000_000) % 65_536 == RUN_AS_USER, "host uid " + hostUid);

        // Not listed, although the modes allow everyone (0777 workspace, 1777 /dev/shm): EACCES.
        Cli.Result workdir = sh("fields", "echo w > " + workspace + "/exec-wrote");
        assertNotEquals(0, workdir.exit());
        assertTrue(workdir.err().contains("Permission denied"), "include_workdir: false: " + workdir.err());
        assertFalse(Files.exists(workspace.resolve("exec-wrote")));
        Cli.Result shm = sh("fields", "echo s > " + shmFile);
        assertNotEquals(0, shm.exit());
        assertTrue(shm.err().contains("Permission denied"), "/dev/shm is in no list: " + shm.err());
        assertFalse(Files.exists(shmFile));
        assertTrue(Files.readString(agentDenied).contains("Permission denied"), "the agent's unlisted write: "
                + Files.readString(agentDenied));
        assertFalse(Files.exists(workspace.resolve("agent-wrote")));
        // read_only: readable, never writable, although its mode (0777) lets everyone write.
        Cli.Result readOnly = sh("fields", "cat " + readOnlyDir + "/readable && echo w > " + readOnlyDir + "/written");
        assertNotEquals(0, readOnly.exit());
        assertEquals("r\n", readOnly.out(), "read_only is readable");
        assertTrue(readOnly.err().contains("Permission denied"), readOnly.err());
        assertFalse(Files.exists(readOnlyDir.resolve("written")));
        assertEquals(0, gateway.cli("sandbox", "delete", "fields").exit());

        // include_workdir: true makes the workspace writable, and only that.
        Path workspace2 = openWorkspace("ws-workdir");
        Cli.Result created2 = create("workdir", policy.replace("include_workdir: false", "include_workdir: true"), workspace2,
                "/bin/sleep", "600");
        assertEquals(0, created2.exit(), created2.out() + created2.err() + gateway.diagnostics());
        Cli.Result written = sh("workdir", "echo w > " + workspace2 + "/exec-wrote && echo ok");
        assertEquals(0, written.exit(), "include_workdir: true: " + written.err() + gateway.diagnostics());
        assertEquals("w", Files.readString(workspace2.resolve("exec-wrote")).strip());
        assertEquals(0, gateway.cli("sandbox", "delete", "workdir").exit());
    }

    @Test
    void aNamedUserIsResolvedInTheWorkloadsPasswdAndIdsThatCannotBeHonouredAreRefused() throws Exception {
        startGateway(Launchers.environment());
        // A name: the uid and primary group of the workload's own /etc/passwd (the host's, for this driver).
        String passwd = Files.readString(Path.of("/etc/passwd"));
        if (!passwd.contains(NAMED_USER + ":x:" + NAMED_UID + ":" + NAMED_GID + ":")) {
            fail("this host's /etc/passwd has no " + NAMED_USER + " with uid " + NAMED_UID + " and gid " + NAMED_GID);
        }
        Cli.Result created = create("named", "version: 1\nprocess:\n  run_as_user: " + NAMED_USER + "\n", null,
                "/bin/sleep", "600");
        assertEquals(0, created.exit(), created.out() + created.err() + gateway.diagnostics());
        Cli.Result id = sh("named", "id -u; id -g");
        assertEquals(0, id.exit(), id.err() + gateway.diagnostics());
        assertEquals(NAMED_UID + "\n" + NAMED_GID + "\n", id.out());
        assertEquals(0, gateway.cli("sandbox", "delete", "named").exit());

        // An id outside what the sandbox maps: refused at create, naming the field; nothing is left.
        Cli.Result unmapped = create("unmapped", "version: 1\nprocess:\n  run_as_user: " + UNMAPPABLE_USER + "\n", null,
                "/bin/sleep", "600");
        assertEquals(1, unmapped.exit(), unmapped.out() + unmapped.err());
        assertTrue(unmapped.err().contains("run_as_user") && unmapped.err().contains("0-65535")
                && unmapped.err().contains(Integer.toString(UNMAPPABLE_USER)), unmapped.err());
        // A name the workload's passwd does not have: refused by the runtime, naming it.
        Cli.Result unknown = create("unknown", "version: 1\nprocess:\n  run_as_user: nosuchuser\n", null,
                "/bin/sleep", "600");
        assertEquals(1, unknown.exit(), unknown.out() + unknown.err());
        assertTrue(unknown.err().contains("process.run_as_user names 'nosuchuser'"), unknown.err() + gateway.diagnostics());
        assertEquals("{\"sandboxes\":[]}", gateway.cli("--output", "json", "sandbox", "list").out().strip(),
                "a refused create leaves nothing");
    }

    @Test
    void onAKernelWithoutLandlockAHardRequirementRefusesTheCreateAndBestEffortSaysSoLoudly() throws Exception {
        requireRoot();
        Map<String, String> env = new LinkedHashMap<>(Launchers.environment());
        env.put("OPENSHELL_RUNTIME_LAUNCHER", withoutLandlock(Path.of(env.get("OPENSHELL_RUNTIME_LAUNCHER"))).toString());
        startGateway(env);
        Path workspace = openWorkspace("ws-best");
        String policy = """
                version: 1
                filesystem_policy:
                  read_only: [/usr, /lib, /lib64, /bin, /etc]
                  read_write: [/tmp]
                landlock:
                  compatibility: %s
                """;
        Cli.Result hard = create("hard", policy.formatted("hard_requirement"), workspace, "/bin/sleep", "600");
        assertEquals(1, hard.exit(), hard.out() + hard.err() + gateway.diagnostics());
        assertTrue(hard.err().contains("landlock.compatibility is hard_requirement")
                && hard.err().contains("Landlock ABI is 0"), hard.err());
        assertEquals("{\"sandboxes\":[]}", gateway.cli("--output", "json", "sandbox", "list").out().strip());

        Cli.Result best = create("best", policy.formatted("best_effort"), workspace, "/bin/sleep", "600");
        assertEquals(0, best.exit(), best.out() + best.err() + gateway.diagnostics());
        // Nothing enforces the lists now, and the sandbox says so wherever anyone looks.
        Cli.Result unlisted = sh("best", "echo w > " + workspace + "/unenforced && echo ok");
        assertEquals(0, unlisted.exit(), unlisted.err());
        JsonObject status = gateway.json("sandbox", "get", "best");
        assertTrue(status.getString("observedDetail", "").contains("LANDLOCK NOT FULLY ENFORCED"), status.toString());
        assertTrue(status.getString("observedDetail", "").contains("no Landlock ruleset at all"), status.toString());
        Path supervisorLog = gateway.state.resolve("drivers/process/sandboxes").resolve(status.getString("id"))
                .resolve("supervisor.log");
        long deadline = System.nanoTime() + AUDIT_WAIT.toNanos();
        while (!audited(supervisorLog) && System.nanoTime() < deadline) {
            Thread.sleep(200);
        }
        assertTrue(audited(supervisorLog), "the supervisor's audit names the degraded control" + gateway.diagnostics());
    }

    private static boolean audited(Path log) throws Exception {
        return Files.exists(log) && Files.readString(log).lines().anyMatch(l -> l.startsWith("{")
                && l.contains("\"event\":\"confinement-degraded\"") && l.contains("LANDLOCK NOT FULLY ENFORCED"));
    }

    private static void awaitFile(Path file) throws Exception {
        long deadline = System.nanoTime() + AUDIT_WAIT.toNanos();
        while (!(Files.exists(file) && Files.size(file) > 0) && System.nanoTime() < deadline) {
            Thread.sleep(100);
        }
    }

    /**
     * The runtime launcher under a seccomp filter that answers ENOSYS to every Landlock call
     * (444-446 on x86-64), which is what a kernel without Landlock answers; the filter is inherited
     * by the runtime and every workload process. Built with gcc, as the native launcher is.
     */
    private Path withoutLandlock(Path runtimeLauncher) throws Exception {
        Path dir = Path.of(System.getProperty("openshell.e2e.launchers"));
        Path source = Files.writeString(tmp.resolve("no-landlock.c"), """
                #include <errno.h>
                #include <stddef.h>
                #include <stdio.h>
                #include <linux/audit.h>
                #include <linux/filter.h>
                #include <linux/seccomp.h>
                #include <sys/syscall.h>
                #include <unistd.h>
                int main(int argc, char **argv) {
                    struct sock_filter f[] = {
                        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
                        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
                        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
                        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
                        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 444, 0, 2),
                        BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, 446, 1, 0),
                        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
                        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
                    };
                    struct sock_fprog prog = {sizeof f / sizeof f[0], f};
                    if (argc < 2 || syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
                        perror("no-landlock: seccomp");
                        return 126;
                    }
                    execv(argv[1], argv + 1);
                    perror("no-landlock: execv");
                    return 127;
                }
                """);
        Path binary = dir.resolve("no-landlock");
        Process gcc = new ProcessBuilder("gcc", "-O2", "-static", "-o", binary.toString(), source.toString())
                .redirectErrorStream(true).start();
        String output = new String(gcc.getInputStream().readAllBytes());
        if (!gcc.waitFor(COMPILE_WAIT.toSeconds(), TimeUnit.SECONDS) || gcc.exitValue() != 0) {
            fail("gcc (with the C library's static archive) is needed to build the no-Landlock wrapper: " + output);
        }
        Files.setPosixFilePermissions(binary, PosixFilePermissions.fromString("rwxr-xr-x"));
        Path wrapper = dir.resolve("runtime-without-landlock");
        Files.writeString(wrapper, "#!/bin/sh\nexec " + binary + " " + runtimeLauncher + " \"$@\"\n");
        Files.setPosixFilePermissions(wrapper, PosixFilePermissions.fromString("rwxr-xr-x"));
        return wrapper;
    }
}
