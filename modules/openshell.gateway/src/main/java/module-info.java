/**
 * The gateway: the public API, sandbox records, admission, JWT minting and supervisor sessions.
 * Exports nothing; it is a program, not a library.
 *
 * <h2>Storage</h2>
 * Sandbox records live in an embedded H2 database under the state directory by default (zero
 * setup) or in PostgreSQL for several gateway replicas on one database. The schema is versioned;
 * a database with a newer schema than this gateway knows is refused, never written.
 *
 * <table>
 * <caption>Bounds owned by the store</caption>
 * <tr><th>Constant</th><th>Value</th><th>At the bound</th></tr>
 * <tr><td>{@code SandboxRecord.MAX_DESCRIPTOR_BYTES}</td><td>64 KiB</td><td>refused, nothing written</td></tr>
 * <tr><td>{@code SandboxRecord.MAX_POLICY_BYTES}</td><td>1 MiB</td><td>refused, nothing written</td></tr>
 * <tr><td>{@code SandboxStore.MAX_SANDBOXES}</td><td>10,000</td><td>create refused</td></tr>
 * </table>
 */
module openshell.gateway {
    requires java.sql;
    requires openshell.driver;
    requires openshell.isolation;
    requires openshell.policy;
    requires openshell.protocol;
    requires io.helidon.webserver.grpc;
    requires io.grpc;
    requires io.grpc.stub;
    requires com.google.protobuf;
    requires io.helidon.common.config;
    requires io.helidon.http;
    requires io.helidon.webserver;
    requires jakarta.json;
    requires io.helidon.config;
    requires io.helidon.dbclient;
    requires io.helidon.dbclient.jdbc;
    requires io.helidon.dbclient.hikari;
    // Both JDBC drivers the store supports; required so they are resolved on the module path.
    requires com.h2database;
    requires org.postgresql.jdbc;
}
