package openshell.driver.docker;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Deque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;

import com.github.dockerjava.api.DockerClient;
import com.github.dockerjava.api.async.ResultCallback;
import com.github.dockerjava.api.command.CreateContainerCmd;
import com.github.dockerjava.api.command.InspectContainerResponse;
import com.github.dockerjava.api.command.InspectImageResponse;
import com.github.dockerjava.api.command.InspectVolumeResponse;
import com.github.dockerjava.api.exception.ConflictException;
import com.github.dockerjava.api.exception.DockerException;
import com.github.dockerjava.api.exception.NotFoundException;
import com.github.dockerjava.api.exception.NotModifiedException;
import com.github.dockerjava.api.model.Capability;
import com.github.dockerjava.api.model.Container;
import com.github.dockerjava.api.model.Frame;
import com.github.dockerjava.api.model.HostConfig;
import com.github.dockerjava.api.model.Mount;
import com.github.dockerjava.api.model.MountType;
import com.github.dockerjava.api.model.RestartPolicy;
import com.github.dockerjava.api.model.VolumeOptions;

import openshell.driver.ComputeDriver;
import openshell.driver.DialDirection;
import openshell.driver.DriverEnvironment;
import openshell.driver.DriverException;
import openshell.driver.DriverException.Kind;
import openshell.driver.DriverStatus;
import openshell.driver.LaunchPlan;
import openshell.driver.Provisioned;
import openshell.driver.container.ContainerNames;
import openshell.driver.container.FenceEvidence;
import openshell.driver.container.ImageIdentity;
import openshell.driver.container.Labels;
import openshell.driver.container.StagedArchive;
import openshell.driver.container.VolumeOwnership;
import openshell.isolation.SandboxId;
import openshell.isolation.WorkloadIdentity;

/**
 * The Docker topology. Per sandbox: a channel volume, a workload container from the user's image
 * pinned by id running the sandbox runtime as PID 1 from a read-only mount, and a companion
 * supervisor container, the only one with a network. The launch bundles reach each program on
 * its standard input, never a file, an argument, a label or an environment variable. The
 * runtime dials the supervisor's socket on the channel volume.
 *
 * <p>Everything the driver needs after a gateway restart is in the state the gateway persists
 * (container ids, volume, generation, namespace, dial direction) and in the labels on each
 * object; an object without this driver's labels for the sandbox is never stopped or removed.
 */
final class DockerDriver implements ComputeDriver {
    static final String NAME = "docker";
    /** Where the runtime image is mounted read-only in the workload. */
    static final String RUNTIME_MOUNT = "/.openshell/runtime";
    /** The runtime's entry point: its static launcher (no libc or shell of the image is used). */
    static final String RUNTIME_ENTRYPOINT = RUNTIME_MOUNT + "/bin/openshell-sandbox-static";
    /** Where the supervisor image is mounted read-only in the supervisor container. */
    static final String SUPERVISOR_MOUNT = "/.openshell/supervisor";
    /** The workload's workspace: a private tmpfs, or the volume the {@code workspace} option names. */
    static final String WORKSPACE = "/sandbox";
    /** The supervisor container's user and group: nobody. */
    static final int SUPERVISOR_ID = 65534;
    private static final String CHANNEL_SOCKET = DockerTopology.CHANNEL_SOCKET;
    /** The resolver the workload's containers are given: the runtime's DNS relay inside the workload. */
    static final String RESOLVER = "127.0.0.53";
    /** Size of the default workspace tmpfs (it counts against the container's memory). */
    static final long WORKSPACE_TMPFS_BYTES = 512L << 20;
    /** Size of the /tmp tmpfs an image without a /tmp gets (the runtime's scratch files). */
    static final long TMP_TMPFS_BYTES = 64L << 20;
    /** Memory of the supervisor container. */
    static final long SUPERVISOR_MEMORY = 512L << 20;
    /** Pids of the supervisor container. */
    static final long SUPERVISOR_PIDS = 512;
    /** Size of the supervisor's /tmp tmpfs. */
    static final long SUPERVISOR_TMP_BYTES = 64L << 20;
    /** Grace a planned stop gives a container before SIGKILL. */
    static final int STOP_GRACE_SECONDS = 1;
    /**
     * How often a sandbox's two containers are watched: a supervisor seen gone stops the workload
     * and a workload seen ended stops the supervisor, within this plus {@link #STOP_GRACE_SECONDS}.
     */
    static final Duration WATCH_INTERVAL = Duration.ofSeconds(1);
    /** Longest wait, after the bundles, for the runtime to serve or refuse. */
    static final Duration RUNTIME_VERDICT_WAIT = Duration.ofSeconds(120);
    /** How often the runtime's log is read meanwhile. */
    static final Duration RUNTIME_VERDICT_POLL = Duration.ofMillis(50);
    /** Most of a container's log read for a verdict or last words. */
    static final int MAX_LOG_BYTES = 64 * 1024;
    /** What the runtime prints once it serves. */
    static final String RUNTIME_SERVING = "\"serving\":true";
    /** What the runtime prints before it exits instead of serving. */
    static final String RUNTIME_REFUSAL = "openshell-sandbox: refusing to serve: ";
    /** How a launch the runtime refused begins. */
    static final String REFUSED = "the sandbox runtime refused the launch: ";
    static final String OPTION_IMAGE = "image";
    static final String OPTION_WORKSPACE = "workspace";
    private static final Set<String> OPTIONS = Set.of(OPTION_IMAGE, OPTION_WORKSPACE);
    private static final Pattern IMAGE_REF = Pattern.compile("[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,254}");
    private static final Pattern VOLUME_NAME = Pattern.compile("[A-Za-z0-9][A-Za-z0-9_.-]{0,127}");

    private final DockerSettings settings;
    private final Object engineLock = new Object();
    private Engine engine;
    private final Map<String, Thread> watchers = new ConcurrentHashMap<>();

    DockerDriver(DriverEnvironment environment) {
        this.settings = DockerSettings.of(environment.settings());
        try {
            int removed = sweep();
            if (removed > 0) {
                System.err.println("openshell docker driver: removed " + removed + " object(s) left without a workload");
            }
        } catch (DriverException e) {
            // The engine may come later; a create then says what is missing.
            System.err.println("openshell docker driver: no orphan sweep at start: " + e.getMessage());
        }
    }

    @Override
    public String name() {
        return NAME;
    }

    DockerSettings settings() {
        return settings;
    }

    /** @return the engine, connected (and its API version negotiated) on first use */
    Engine engine() {
        synchronized (engineLock) {
            if (engine == null) {
                engine = Engine.connect(settings.host());
            }
            return engine;
        }
    }

    @Override
    public void close() {
        watchers.values().forEach(Thread::interrupt);
        synchronized (engineLock) {
            if (engine != null) {
                engine.close();
                engine = null;
            }
        }
    }

    @Override
    public Provisioned create(LaunchPlan plan) {
        for (String option : plan.options().keySet()) {
            if (!OPTIONS.contains(option)) {
                throw new DriverException(Kind.INVALID, "the Docker driver has no option '" + option + "'; options: "
                        + new java.util.TreeSet<>(OPTIONS));
            }
        }
        String image = plan.options().get(OPTION_IMAGE);
        if (image == null || !IMAGE_REF.matcher(image).matches()) {
            throw new DriverException(Kind.INVALID, "the Docker driver needs the image to run (sandbox create --image IMAGE)"
                    + (image == null ? "" : "; not an image reference: '" + image + "'"));
        }
        Optional<String> workspace = Optional.ofNullable(plan.options().get(OPTION_WORKSPACE));
        if (workspace.isPresent() && !VOLUME_NAME.matcher(workspace.get()).matches()) {
            throw new DriverException(Kind.INVALID, "the Docker driver's workspace is a named volume; not a volume name: '"
                    + workspace.get() + "'");
        }
        if (settings.direction() == DialDirection.SUPERVISOR_INITIATED) {
            throw supervisorInitiatedUnavailable();
        }
        Launch launch = prepare(plan.context().sandboxId());
        Engine e = engine();
        InspectImageResponse pinned = pin(e, image);
        String supervisorImage = supervisorImage(e);
        ContainerNames names = new ContainerNames(settings.namespace(), plan.context().sandboxId());
        workspace.ifPresent(w -> VolumeOwnership.admitUserVolume(w, volume(e, w)));
        ImageFacts facts = identity(e, names, pinned, new String(plan.context().policy().document(), StandardCharsets.UTF_8));
        requireSealedIdentity(facts.identity(), plan.context().workload());
        Deque<Runnable> undo = new ArrayDeque<>();
        try {
            channelVolume(e, names, undo, true);
            return launch(e, names, launch, plan, pinned.getId(), supervisorImage, facts, workspace,
                    DialDirection.RUNTIME_INITIATED, undo);
        } catch (RuntimeException failure) {
            rollBack(undo, failure);
            throw failure;
        }
    }

    private static DriverException supervisorInitiatedUnavailable() {
        return new DriverException(Kind.UNAVAILABLE, "connection.direction=supervisor is recorded by the Docker driver, but the"
                + " supervisor and the sandbox runtime programs implement only runtime-initiated connections today"
                + " (SupervisorMain and SandboxMain build their endpoints with Initiator.RUNTIME); nothing was created");
    }

    /** The two image directories, checked before anything is made. */
    private record Launch(Path runtimeDir, Path supervisorDir) {
    }

    private Launch prepare(SandboxId id) {
        return new Launch(DockerSettings.requireImage(settings.runtimeDir(), DockerSettings.RUNTIME_DIR, "sandbox",
                "bin/openshell-sandbox-static"),
                DockerSettings.requireImage(settings.supervisorDir(), DockerSettings.SUPERVISOR_DIR, "supervisor", "bin/java"));
    }

    @Override
    public Provisioned start(SandboxId id, byte[] state, LaunchPlan plan) {
        DockerTopology previous = DockerTopology.fromState(state);
        ContainerNames names = new ContainerNames(previous.namespace(), id);
        if (plan.runtimeGeneration() <= previous.generation()) {
            throw new DriverException(Kind.INVALID, "generation " + plan.runtimeGeneration() + " is not after the recorded "
                    + previous.generation());
        }
        if (previous.direction() == DialDirection.SUPERVISOR_INITIATED) {
            throw supervisorInitiatedUnavailable();
        }
        Launch launch = prepare(id);
        Engine e = engine();
        Optional<InspectContainerResponse> workload = owned(e, previous.workloadId(), names);
        Optional<InspectContainerResponse> supervisor = owned(e, previous.supervisorId(), names);
        if (workload.map(DockerDriver::running).orElse(false) || supervisor.map(DockerDriver::running).orElse(false)) {
            throw new DriverException(Kind.INVALID, "sandbox " + id + " still runs; stop it first");
        }
        InspectImageResponse pinned = pin(e, previous.imageId());
        String supervisorImage = supervisorImage(e);
        ImageFacts facts = identity(e, names, pinned, new String(plan.context().policy().document(), StandardCharsets.UTF_8));
        requireSealedIdentity(facts.identity(), plan.context().workload());
        Optional<String> workspace = Optional.ofNullable(plan.options().get(OPTION_WORKSPACE));
        workspace.ifPresent(w -> VolumeOwnership.admitUserVolume(w, volume(e, w)));
        stopWatching(id);
        // Containers are immutable: the next generation gets new ones on the same channel volume.
        workload.ifPresent(c -> remove(e, c.getId()));
        supervisor.ifPresent(c -> remove(e, c.getId()));
        Deque<Runnable> undo = new ArrayDeque<>();
        try {
            channelVolume(e, names, undo, false);
            return launch(e, names, launch, plan, pinned.getId(), supervisorImage, facts, workspace, previous.direction(),
                    undo);
        } catch (RuntimeException failure) {
            rollBack(undo, failure);
            throw failure;
        }
    }

    /**
     * The launch is sealed (bundles minted by the gateway) for the context's identity; the runtime
     * refuses to serve as any other, so a different image identity is refused here, by name.
     */
    private static void requireSealedIdentity(ImageIdentity identity, WorkloadIdentity sealed) {
        if (identity.uid() != sealed.uid() || identity.gid() != sealed.gid()) {
            throw new DriverException(Kind.INVALID, "the workload would run as " + identity.user() + " (from the "
                    + identity.source().name().toLowerCase(java.util.Locale.ROOT) + "), but the launch is sealed for "
                    + sealed.uid() + ":" + sealed.gid() + " (the policy's process.run_as_user, or the gateway's default"
                    + " when it names none); name the image's user in process.run_as_user; nothing was created");
        }
    }

    private Provisioned launch(Engine e, ContainerNames names, Launch launch, LaunchPlan plan, String imageId,
                               String supervisorImage, ImageFacts facts, Optional<String> workspace,
                               DialDirection direction, Deque<Runnable> undo) {
        DockerClient d = e.docker();
        ImageIdentity identity = facts.identity();
        SandboxId id = names.id();
        long generation = plan.runtimeGeneration();
        stageChannel(e, names, supervisorImage, identity);
        String workload = createWorkload(d, names, launch, imageId, facts, workspace, generation);
        undo.push(() -> remove(e, workload));
        FenceEvidence fence = fence(d.inspectContainerCmd(workload).exec());
        if (!fence.violations().isEmpty()) {
            throw new DriverException(Kind.FAILED, fence.reason() + "; nothing was started");
        }
        String supervisor = createSupervisor(d, names, launch, supervisorImage, identity, generation);
        undo.push(() -> remove(e, supervisor));
        try (Engine.Stdin in = e.attachStdin(workload)) {
            d.startContainerCmd(workload).exec();
            in.send(plan.material().runtimeBundle());
        }
        try (Engine.Stdin in = e.attachStdin(supervisor)) {
            d.startContainerCmd(supervisor).exec();
            in.send(plan.material().supervisorBundle());
        }
        awaitServing(d, workload, supervisor);
        DockerTopology t = new DockerTopology(names.namespace(), generation, workload, supervisor, names.channelVolume(),
                imageId, identity.uid(), identity.gid(), direction);
        watch(id, t);
        return Provisioned.of(t.descriptor(), direction, t.state());
    }

    private String createWorkload(DockerClient d, ContainerNames names, Launch launch, String imageId, ImageFacts facts,
                                  Optional<String> workspace, long generation) {
        ImageIdentity identity = facts.identity();
        List<Mount> mounts = new ArrayList<>(List.of(
                new Mount().withType(MountType.BIND).withSource(launch.runtimeDir().toString()).withTarget(RUNTIME_MOUNT)
                        .withReadOnly(true),
                new Mount().withType(MountType.VOLUME).withSource(names.channelVolume()).withTarget(DockerTopology.CHANNEL_MOUNT)
                        .withVolumeOptions(new VolumeOptions().withNoCopy(true))));
        workspace.ifPresent(w -> mounts.add(new Mount().withType(MountType.VOLUME).withSource(w).withTarget(WORKSPACE)));
        HostConfig host = HostConfig.newHostConfig()
                .withNetworkMode(FenceEvidence.NONE)
                .withCapDrop(Capability.ALL)
                .withSecurityOpts(List.of("no-new-privileges"))
                .withDns(RESOLVER).withDnsSearch(".")
                .withPidsLimit(settings.pidsLimit())
                .withMemory(settings.memoryBytes()).withMemorySwap(settings.memoryBytes())
                .withNanoCPUs(settings.milliCpus() * 1_000_000L)
                .withSysctls(Map.of("net.ipv4.ip_unprivileged_port_start", "0"))
                .withRestartPolicy(RestartPolicy.noRestart())
                .withMounts(mounts)
                .withGroupAdd(identity.groups().stream().map(String::valueOf).toList());
        Map<String, String> tmpfs = new LinkedHashMap<>();
        if (workspace.isEmpty()) {
            tmpfs.put(WORKSPACE, "uid=" + identity.uid() + ",gid=" + identity.gid() + ",mode=0700,size=" + WORKSPACE_TMPFS_BYTES);
        }
        if (!facts.hasTmp()) {
            // Only where the image has none: an image's own /tmp is never covered.
            tmpfs.put("/tmp", "mode=1777,size=" + TMP_TMPFS_BYTES);
        }
        if (!tmpfs.isEmpty()) {
            host.withTmpFs(tmpfs);
        }
        List<String> args = List.of("--sandbox", names.id().value(), "--generation", Long.toString(generation),
                "--channel", CHANNEL_SOCKET, "--bundle-stdin", "--workspace", WORKSPACE);
        CreateContainerCmd cmd = d.createContainerCmd(imageId).withName(names.workload())
                .withLabels(labels(names, Labels.Role.SANDBOX, generation))
                .withUser(identity.user()).withWorkingDir("/")
                .withEntrypoint(RUNTIME_ENTRYPOINT).withCmd(args)
                .withStdinOpen(true).withStdInOnce(true).withAttachStdin(true)
                .withAttachStdout(false).withAttachStderr(false).withTty(false)
                .withHostConfig(host);
        return cmd.exec().getId();
    }

    private String createSupervisor(DockerClient d, ContainerNames names, Launch launch, String supervisorImage,
                                    ImageIdentity identity, long generation) {
        HostConfig host = HostConfig.newHostConfig()
                // The only container of the sandbox with a network: it dials the gateway and the upstreams.
                .withNetworkMode("host")
                .withCapDrop(Capability.ALL)
                .withSecurityOpts(List.of("no-new-privileges"))
                .withReadonlyRootfs(true)
                .withPidsLimit(SUPERVISOR_PIDS)
                .withMemory(SUPERVISOR_MEMORY).withMemorySwap(SUPERVISOR_MEMORY)
                .withRestartPolicy(RestartPolicy.noRestart())
                .withTmpFs(Map.of("/tmp", "mode=1777,size=" + SUPERVISOR_TMP_BYTES))
                .withMounts(List.of(
                        new Mount().withType(MountType.BIND).withSource(launch.supervisorDir().toString())
                                .withTarget(SUPERVISOR_MOUNT).withReadOnly(true),
                        new Mount().withType(MountType.VOLUME).withSource(names.channelVolume())
                                .withTarget(DockerTopology.CHANNEL_MOUNT).withVolumeOptions(new VolumeOptions().withNoCopy(true))));
        // --runtime-pid means nothing across pid namespaces: the runtime's peer is checked by its uid.
        List<String> args = List.of("-XX:AOTCache=lib/openshell-supervisor.aot", "@conf/openshell-supervisor.args",
                "--sandbox", names.id().value(), "--generation", Long.toString(generation), "--channel", CHANNEL_SOCKET,
                "--bundle-stdin", "--runtime-uid", Integer.toString(identity.uid()));
        return d.createContainerCmd(supervisorImage).withName(names.supervisor())
                .withLabels(labels(names, Labels.Role.SUPERVISOR, generation))
                .withUser(SUPERVISOR_ID + ":" + SUPERVISOR_ID).withWorkingDir(SUPERVISOR_MOUNT)
                .withEntrypoint(SUPERVISOR_MOUNT + "/bin/java").withCmd(args)
                .withStdinOpen(true).withStdInOnce(true).withAttachStdin(true)
                .withAttachStdout(false).withAttachStderr(false).withTty(false)
                .withHostConfig(host).exec().getId();
    }

    private static Map<String, String> labels(ContainerNames names, Labels.Role role, long generation) {
        Map<String, String> m = new LinkedHashMap<>(Labels.of(names, role, DockerTopology.BACKEND.name()));
        m.put(Labels.GENERATION, Long.toString(generation));
        return m;
    }

    /**
     * The channel volume: made (create) or found (start), and checked either way: local, no
     * options, labelled for exactly this sandbox.
     */
    private void channelVolume(Engine e, ContainerNames names, Deque<Runnable> undo, boolean fresh) {
        DockerClient d = e.docker();
        Optional<VolumeOwnership.VolumeFacts> existing = volume(e, names.channelVolume());
        if (existing.isPresent()) {
            if (fresh) {
                throw new DriverException(Kind.INVALID, "the channel volume " + names.channelVolume() + " of sandbox "
                        + names.id() + " already exists; delete the sandbox first");
            }
            VolumeOwnership.requireChannel(existing.get(), names);
            return;
        }
        d.createVolumeCmd().withName(names.channelVolume()).withDriver(VolumeOwnership.LOCAL)
                .withLabels(Labels.of(names, Labels.Role.CHANNEL, DockerTopology.BACKEND.name())).exec();
        undo.push(() -> removeVolume(e, names.channelVolume()));
        VolumeOwnership.requireChannel(volume(e, names.channelVolume()).orElseThrow(() -> new DriverException(Kind.FAILED,
                "the channel volume " + names.channelVolume() + " vanished after it was made")), names);
    }

    /**
     * Makes the channel directory on the channel volume, through a staging container that
     * has no user (Docker 20.10 keeps an archive's numeric owners only so) and is never started.
     */
    private void stageChannel(Engine e, ContainerNames names, String supervisorImage, ImageIdentity identity) {
        DockerClient d = e.docker();
        byte[] tar = StagedArchive.create().directory(DockerTopology.CHANNEL_DIR, SUPERVISOR_ID, identity.gid(), 01770)
                .toBytes();
        String staging = d.createContainerCmd(supervisorImage).withName(names.staging())
                .withLabels(labels(names, Labels.Role.STAGING, 0)).withEntrypoint("/nonexistent")
                .withHostConfig(HostConfig.newHostConfig().withNetworkMode(FenceEvidence.NONE).withCapDrop(Capability.ALL)
                        .withMounts(List.of(new Mount().withType(MountType.VOLUME).withSource(names.channelVolume())
                                .withTarget(DockerTopology.CHANNEL_MOUNT).withVolumeOptions(new VolumeOptions().withNoCopy(true)))))
                .exec().getId();
        try {
            d.copyArchiveToContainerCmd(staging).withRemotePath(DockerTopology.CHANNEL_MOUNT)
                    .withTarInputStream(new ByteArrayInputStream(tar)).exec();
        } finally {
            remove(e, staging);
        }
    }

    /**
     * What the driver reads of the pinned image, out of a container that is made and never
     * started (no image code runs): the identity, and whether it has a {@code /tmp} (the runtime's
     * scratch space; an image without one, {@code FROM scratch}, gets a private tmpfs there).
     */
    record ImageFacts(ImageIdentity identity, boolean hasTmp) {
    }

    private ImageFacts identity(Engine e, ContainerNames names, InspectImageResponse image, String policy) {
        DockerClient d = e.docker();
        String reader = d.createContainerCmd(image.getId()).withName(names.workload() + "-identity")
                .withLabels(labels(names, Labels.Role.IDENTITY, 0)).withEntrypoint("/nonexistent")
                .withHostConfig(HostConfig.newHostConfig().withNetworkMode(FenceEvidence.NONE).withCapDrop(Capability.ALL))
                .exec().getId();
        try {
            Optional<String> passwd = accountFile(d, reader, "/etc/passwd");
            Optional<String> group = accountFile(d, reader, "/etc/group");
            String user = image.getConfig() == null || image.getConfig().getUser() == null ? "" : image.getConfig().getUser();
            boolean tmp;
            try {
                d.copyArchiveFromContainerCmd(reader, "/tmp").exec().close();
                tmp = true;
            } catch (NotFoundException absent) {
                tmp = false;
            } catch (IOException ex) {
                tmp = true;
            }
            return new ImageFacts(ImageIdentity.resolve(policy, user, passwd, group), tmp);
        } finally {
            remove(e, reader);
        }
    }

    private static Optional<String> accountFile(DockerClient d, String container, String path) {
        try (InputStream in = d.copyArchiveFromContainerCmd(container, path).exec()) {
            Map<String, byte[]> files = StagedArchive.readFiles(in);
            return files.values().stream().findFirst().map(b -> new String(b, StandardCharsets.UTF_8));
        } catch (NotFoundException absent) {
            return Optional.empty();
        } catch (IOException ex) {
            throw new DriverException(Kind.FAILED, "cannot read " + path + " of the image: " + ex.getMessage(), ex);
        }
    }

    /** The image, by its id: never pulled, never built. */
    private static InspectImageResponse pin(Engine e, String image) {
        try {
            return e.docker().inspectImageCmd(image).exec();
        } catch (NotFoundException absent) {
            throw new DriverException(Kind.INVALID, "the image '" + image + "' is not known to dockerd at " + e.host()
                    + "; the Docker driver never pulls or builds: load or import it first (docker load, docker import);"
                    + " nothing was created");
        }
    }

    private String supervisorImage(Engine e) {
        try {
            return e.docker().inspectImageCmd(settings.supervisorImage()).exec().getId();
        } catch (NotFoundException absent) {
            throw new DriverException(Kind.UNAVAILABLE, "the supervisor's base image '" + settings.supervisorImage()
                    + "' is not known to dockerd at " + e.host() + "; make it with images/rootfs/glibc-rootfs.sh OUT.tar"
                    + " && docker import OUT.tar " + DockerSettings.DEFAULT_SUPERVISOR_IMAGE
                    + " (or set supervisor.image); nothing was created");
        }
    }

    private static Optional<VolumeOwnership.VolumeFacts> volume(Engine e, String name) {
        try {
            InspectVolumeResponse v = e.docker().inspectVolumeCmd(name).exec();
            return Optional.of(new VolumeOwnership.VolumeFacts(v.getName(), v.getDriver(), v.getOptions(), v.getLabels()));
        } catch (NotFoundException absent) {
            return Optional.empty();
        }
    }

    /** Waits until the runtime serves, or refuses, or either container ends. */
    private static void awaitServing(DockerClient d, String workload, String supervisor) {
        long deadline = System.nanoTime() + RUNTIME_VERDICT_WAIT.toNanos();
        while (true) {
            String log = log(d, workload);
            if (log.contains(RUNTIME_SERVING)) {
                return;
            }
            InspectContainerResponse w = d.inspectContainerCmd(workload).exec();
            if (!running(w)) {
                log = log(d, workload);
                if (log.contains(RUNTIME_SERVING)) {
                    return;
                }
                int at = log.lastIndexOf(RUNTIME_REFUSAL);
                if (at >= 0) {
                    throw new DriverException(Kind.INVALID, REFUSED + log.substring(at + RUNTIME_REFUSAL.length()).lines()
                            .findFirst().orElse(""));
                }
                throw new DriverException(Kind.FAILED, "the sandbox runtime exited with " + w.getState().getExitCodeLong()
                        + " before serving: " + tail(log));
            }
            if (!running(d.inspectContainerCmd(supervisor).exec())) {
                throw new DriverException(Kind.FAILED, "the supervisor container ended before the runtime served: "
                        + tail(log(d, supervisor)));
            }
            if (System.nanoTime() - deadline > 0) {
                throw new DriverException(Kind.FAILED, "the sandbox runtime neither served nor refused within "
                        + RUNTIME_VERDICT_WAIT + ": " + tail(log));
            }
            try {
                Thread.sleep(RUNTIME_VERDICT_POLL);
            } catch (InterruptedException ex) {
                Thread.currentThread().interrupt();
                throw new DriverException(Kind.FAILED, "interrupted while waiting for the sandbox runtime", ex);
            }
        }
    }

    /** A container's log (stdout and stderr), at most {@link #MAX_LOG_BYTES}; empty if it cannot be read. */
    static String log(DockerClient d, String container) {
        StringBuilder text = new StringBuilder();
        try {
            d.logContainerCmd(container).withStdOut(true).withStdErr(true).withFollowStream(false).withTailAll()
                    .exec(new ResultCallback.Adapter<Frame>() {
                        @Override
                        public void onNext(Frame frame) {
                            if (text.length() < MAX_LOG_BYTES) {
                                text.append(new String(frame.getPayload(), StandardCharsets.UTF_8));
                            }
                        }
                    }).awaitCompletion(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (DockerException | IllegalStateException e) {
            return "";
        }
        return text.toString();
    }

    private static String tail(String log) {
        String trimmed = log.strip();
        return trimmed.isEmpty() ? "(no output)" : trimmed.length() > 2000 ? "..." + trimmed.substring(trimmed.length() - 2000)
                : trimmed;
    }

    @Override
    public void stop(SandboxId id, byte[] state) {
        DockerTopology t = DockerTopology.fromState(state);
        ContainerNames names = new ContainerNames(t.namespace(), id);
        Engine e = engine();
        stopWatching(id);
        owned(e, t.supervisorId(), names).ifPresent(c -> stopContainer(e, c.getId()));
        owned(e, t.workloadId(), names).ifPresent(c -> stopContainer(e, c.getId()));
    }

    @Override
    public void delete(SandboxId id, byte[] state) {
        DockerTopology t = DockerTopology.fromState(state);
        ContainerNames names = new ContainerNames(t.namespace(), id);
        Engine e = engine();
        stopWatching(id);
        owned(e, t.supervisorId(), names).ifPresent(c -> remove(e, c.getId()));
        owned(e, t.workloadId(), names).ifPresent(c -> remove(e, c.getId()));
        // Whatever else of this sandbox carries our labels (a staging or identity container a crash left).
        for (Container c : managedContainers(e, names.namespace())) {
            if (id.value().equals(c.getLabels().get(Labels.SANDBOX_ID))) {
                remove(e, c.getId());
            }
        }
        volume(e, t.channelVolume()).ifPresent(v -> {
            if (Labels.ownedBy(v.labels(), names)) {
                removeVolume(e, v.name());
            }
        });
    }

    @Override
    public DriverStatus status(SandboxId id, byte[] state) {
        DockerTopology t = DockerTopology.fromState(state);
        ContainerNames names = new ContainerNames(t.namespace(), id);
        Engine e = engine();
        Optional<InspectContainerResponse> workload = owned(e, t.workloadId(), names).filter(c -> generation(c) == t.generation());
        Optional<InspectContainerResponse> supervisor = owned(e, t.supervisorId(), names)
                .filter(c -> generation(c) == t.generation());
        boolean workloadUp = workload.map(DockerDriver::running).orElse(false);
        boolean supervisorUp = supervisor.map(DockerDriver::running).orElse(false);
        if (workloadUp) {
            FenceEvidence fence = fence(workload.get());
            if (!fence.violations().isEmpty()) {
                // Verified, not assumed: a fence changed behind the driver's back ends the sandbox.
                stopWatching(id);
                supervisor.ifPresent(c -> stopContainer(e, c.getId()));
                stopContainer(e, workload.get().getId());
                String why = fence.reason() + "; the driver stopped the workload and its supervisor";
                return new DriverStatus(DriverStatus.Phase.STOPPED, why, List.of(
                        new DriverStatus.Part(DriverStatus.SUPERVISOR, false, "stopped: " + fence.reason()),
                        new DriverStatus.Part(DriverStatus.RUNTIME, false, "stopped: " + fence.reason()),
                        new DriverStatus.Part(DriverStatus.WORKLOAD, false, "stopped: " + fence.reason())));
            }
        }
        if (workloadUp && supervisorUp) {
            watch(id, t);
            return new DriverStatus(DriverStatus.Phase.RUNNING, "workload " + shortId(t.workloadId()) + " and supervisor "
                    + shortId(t.supervisorId()) + " run; fence holds (network none, no capabilities)");
        }
        List<DriverStatus.Part> parts = new ArrayList<>();
        parts.add(new DriverStatus.Part(DriverStatus.SUPERVISOR, supervisorUp, describe(e, supervisor, "supervisor")));
        String w = describe(e, workload, "workload");
        parts.add(new DriverStatus.Part(DriverStatus.RUNTIME, workloadUp, w));
        parts.add(new DriverStatus.Part(DriverStatus.WORKLOAD, workloadUp, w));
        String seen = parts.stream().map(p -> p.name() + " " + p.detail()).collect(java.util.stream.Collectors.joining("; "));
        if (workloadUp != supervisorUp) {
            // One part alone never runs on: the watcher's rule, applied at every poll too.
            stopContainer(e, workloadUp ? workload.get().getId() : supervisor.get().getId());
            return new DriverStatus(DriverStatus.Phase.DEGRADED, (workloadUp ? "supervisor" : "workload")
                    + " is gone, the driver stops the other (" + seen + ")", parts);
        }
        if (workload.isEmpty() && supervisor.isEmpty() && volume(e, t.channelVolume()).isEmpty()) {
            return new DriverStatus(DriverStatus.Phase.GONE, "nothing of the sandbox is left", parts);
        }
        return new DriverStatus(DriverStatus.Phase.STOPPED, "nothing runs (" + seen + ")", parts);
    }

    private static String describe(Engine e, Optional<InspectContainerResponse> c, String what) {
        if (c.isEmpty()) {
            return "container gone";
        }
        InspectContainerResponse.ContainerState s = c.get().getState();
        if (Boolean.TRUE.equals(s.getRunning())) {
            return "container " + shortId(c.get().getId()) + " running";
        }
        String words = lastWords(log(e.docker(), c.get().getId()));
        return "container " + shortId(c.get().getId()) + " " + s.getStatus() + " (exit " + s.getExitCodeLong()
                + (Boolean.TRUE.equals(s.getOOMKilled()) ? ", out of memory" : "") + ")" + (words.isEmpty() ? "" : ": " + words);
    }

    /** The last line the supervisor or runtime wrote about how it ended, if any. */
    private static String lastWords(String log) {
        List<String> lines = log.lines().filter(l -> l.startsWith("openshell-supervisor: the agent ended")
                || l.startsWith("openshell-supervisor: boundary failed") || l.startsWith("openshell-supervisor: stopped")
                || l.startsWith(RUNTIME_REFUSAL) || l.startsWith("openshell-sandbox: the supervisor")).toList();
        return lines.isEmpty() ? "" : lines.getLast();
    }

    private static long generation(InspectContainerResponse c) {
        try {
            return Long.parseLong(c.getConfig().getLabels().getOrDefault(Labels.GENERATION, "-1"));
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    static FenceEvidence fence(InspectContainerResponse c) {
        HostConfig h = c.getHostConfig();
        List<String> networks = c.getNetworkSettings() == null || c.getNetworkSettings().getNetworks() == null ? List.of()
                : List.copyOf(c.getNetworkSettings().getNetworks().keySet());
        return new FenceEvidence(c.getId(), h.getNetworkMode(), networks, caps(h.getCapAdd()), caps(h.getCapDrop()),
                Boolean.TRUE.equals(h.getPrivileged()), h.getSecurityOpts());
    }

    private static List<String> caps(Capability[] caps) {
        return caps == null ? List.of() : Arrays.stream(caps).map(Capability::name).toList();
    }

    /**
     * The container at {@code id}, if it is this driver's for exactly this sandbox: an id the
     * state names but whose labels say otherwise is never touched.
     */
    static Optional<InspectContainerResponse> owned(Engine e, String id, ContainerNames names) {
        try {
            InspectContainerResponse c = e.docker().inspectContainerCmd(id).exec();
            return c.getConfig() != null && Labels.ownedBy(c.getConfig().getLabels(), names) ? Optional.of(c) : Optional.empty();
        } catch (NotFoundException gone) {
            return Optional.empty();
        }
    }

    private static boolean running(InspectContainerResponse c) {
        return c.getState() != null && Boolean.TRUE.equals(c.getState().getRunning());
    }

    private static void stopContainer(Engine e, String id) {
        try {
            e.docker().stopContainerCmd(id).withTimeout(STOP_GRACE_SECONDS).exec();
        } catch (NotFoundException | NotModifiedException gone) {
            // already stopped or removed
        }
    }

    private static void remove(Engine e, String id) {
        try {
            e.docker().removeContainerCmd(id).withForce(true).withRemoveVolumes(false).exec();
        } catch (NotFoundException gone) {
            // already removed
        } catch (ConflictException busy) {
            // removal already in progress
        }
    }

    private static void removeVolume(Engine e, String name) {
        try {
            e.docker().removeVolumeCmd(name).exec();
        } catch (NotFoundException gone) {
            // already removed
        }
    }

    private static void rollBack(Deque<Runnable> undo, RuntimeException failure) {
        while (!undo.isEmpty()) {
            try {
                undo.pop().run();
            } catch (RuntimeException e) {
                failure.addSuppressed(e);
            }
        }
    }

    private static String shortId(String id) {
        return id.length() > 12 ? id.substring(0, 12) : id;
    }

    private static List<Container> managedContainers(Engine e, String namespace) {
        return e.docker().listContainersCmd().withShowAll(true)
                .withLabelFilter(Map.of(Labels.MANAGED_BY, Labels.MANAGER, Labels.NAMESPACE, namespace)).exec();
    }

    /**
     * Removes this namespace's objects that have no workload: supervisor, staging and identity
     * containers of a sandbox whose workload container is gone, and its channel volume. Only
     * objects carrying this driver's labels for this namespace are looked at.
     *
     * @return how many objects were removed
     */
    int sweep() {
        Engine e = engine();
        List<Container> containers = managedContainers(e, settings.namespace());
        Set<String> withWorkload = new HashSet<>();
        for (Container c : containers) {
            if (Labels.Role.SANDBOX.value().equals(c.getLabels().get(Labels.ROLE))) {
                withWorkload.add(c.getLabels().get(Labels.SANDBOX_ID));
            }
        }
        int removed = 0;
        for (Container c : containers) {
            String role = c.getLabels().get(Labels.ROLE);
            String sandbox = c.getLabels().get(Labels.SANDBOX_ID);
            boolean transient_ = Labels.Role.STAGING.value().equals(role) || Labels.Role.IDENTITY.value().equals(role);
            if (transient_ || (!Labels.Role.SANDBOX.value().equals(role) && !withWorkload.contains(sandbox))) {
                remove(e, c.getId());
                removed++;
            }
        }
        Map<String, List<String>> filter = new HashMap<>();
        filter.put("label", List.of(Labels.MANAGED_BY + "=" + Labels.MANAGER, Labels.NAMESPACE + "=" + settings.namespace()));
        List<InspectVolumeResponse> volumes = e.docker().listVolumesCmd().withFilter("label", filter.get("label")).exec()
                .getVolumes();
        for (InspectVolumeResponse v : volumes == null ? List.<InspectVolumeResponse>of() : volumes) {
            Map<String, String> labels = v.getLabels();
            if (Labels.managed(labels) && settings.namespace().equals(labels.get(Labels.NAMESPACE))
                    && !withWorkload.contains(labels.get(Labels.SANDBOX_ID))) {
                try {
                    e.docker().removeVolumeCmd(v.getName()).exec();
                    removed++;
                } catch (NotFoundException | ConflictException busy) {
                    // gone meanwhile, or still mounted by a container we did not make: left alone
                }
            }
        }
        return removed;
    }

    /**
     * Watches a running sandbox's two containers: a supervisor gone stops the workload, a workload
     * ended stops the supervisor, each within {@link #WATCH_INTERVAL} plus the stop grace. One
     * watcher per sandbox; a gateway restart starts it again at the first status poll.
     */
    private void watch(SandboxId id, DockerTopology t) {
        watchers.computeIfAbsent(id.value(), k -> Thread.ofVirtual().name("openshell-docker-watch-" + k).start(() -> {
            try {
                ContainerNames names = new ContainerNames(t.namespace(), id);
                while (!Thread.currentThread().isInterrupted()) {
                    Thread.sleep(WATCH_INTERVAL);
                    Engine e = engine();
                    boolean w = owned(e, t.workloadId(), names).map(DockerDriver::running).orElse(false);
                    boolean s = owned(e, t.supervisorId(), names).map(DockerDriver::running).orElse(false);
                    if (w && s) {
                        continue;
                    }
                    if (w) {
                        stopContainer(e, t.workloadId());
                    }
                    if (s) {
                        stopContainer(e, t.supervisorId());
                    }
                    return;
                }
            } catch (InterruptedException stop) {
                // stopped by stop, delete, start or close
            } catch (RuntimeException e) {
                System.err.println("openshell docker driver: watcher of " + id + " ended: " + e.getMessage());
            } finally {
                watchers.remove(id.value(), Thread.currentThread());
            }
        }));
    }

    private void stopWatching(SandboxId id) {
        Thread w = watchers.remove(id.value());
        if (w != null) {
            w.interrupt();
        }
    }
}
