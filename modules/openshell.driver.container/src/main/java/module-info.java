/**
 * What every container driver shares, so Docker and Podman place a sandbox the same way without
 * either branching on the other's name: the names of a sandbox's objects, the labels that prove
 * which sandbox and which gateway namespace an object belongs to, the check of the outer network
 * fence over an engine's inspect result, the ownership check that keeps one sandbox from mounting
 * another's channel volume, the workload identity read from the pinned image's own
 * {@code /etc/passwd} and {@code /etc/group} (root refused), and the archives staged into volumes
 * with numeric owners and modes. Pure logic: no engine client, so it is tested without one and a
 * driver's engine types never reach it.
 *
 * <p>Exported only to the container drivers, which are its one audience.
 *
 * <table>
 * <caption>Bounds owned by this module</caption>
 * <tr><th>Constant</th><th>Value</th><th>At the bound</th></tr>
 * <tr><td>{@code ContainerNames.MAX_NAME_CHARS}</td><td>200</td><td>the namespace part is shortened, never the id</td></tr>
 * <tr><td>{@code ContainerNames.VOLUME_HASH_CHARS}</td><td>32 hex characters of sha256(namespace NUL id)</td><td>the volume name's suffix</td></tr>
 * <tr><td>{@code ImageIdentity.MAX_ACCOUNT_FILE_BYTES}</td><td>1 MiB per passwd or group file</td><td>INVALID, nothing created</td></tr>
 * <tr><td>{@code ImageIdentity.DEFAULT_ID}</td><td>1000: uid and gid of a workload whose image names no USER and whose policy names no user</td><td>-</td></tr>
 * <tr><td>{@code StagedArchive.MAX_ENTRIES}</td><td>64 entries</td><td>INVALID</td></tr>
 * <tr><td>{@code StagedArchive.MAX_BYTES}</td><td>1 MiB of file content</td><td>INVALID</td></tr>
 * </table>
 */
// The friends require this module, so it is compiled before them: javac's warning that they are not
// found yet is expected ("module" lint).
@SuppressWarnings("module")
module openshell.driver.container {
    requires transitive openshell.driver;
    requires openshell.policy;

    exports openshell.driver.container to openshell.driver.docker;
}
