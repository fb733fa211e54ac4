package openshell.tests.descriptors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.io.File;
import java.io.IOException;
import java.lang.module.ModuleDescriptor;
import java.lang.module.ModuleFinder;
import java.lang.module.ModuleReference;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * One snapshot per product module: exports, opens, requires, uses and provides. A changed
 * descriptor fails until its snapshot is updated on purpose
 * ({@code -Dopenshell.descriptors.update=true} rewrites them).
 */
class ModuleDescriptorSnapshotTest {
    private static final Path SNAPSHOTS = Path.of("src/test/resources/descriptors");
    private static final boolean UPDATE = Boolean.getBoolean("openshell.descriptors.update");

    static Map<String, ModuleDescriptor> productModules() {
        List<Path> entries = new ArrayList<>();
        for (String property : List.of("jdk.module.path", "java.class.path")) {
            String value = System.getProperty(property, "");
            for (String entry : value.split(File.pathSeparator)) {
                if (!entry.isBlank()) {
                    entries.add(Path.of(entry));
                }
            }
        }
        Map<String, ModuleDescriptor> modules = new TreeMap<>();
        for (Path entry : entries) {
            if (!Files.exists(entry)) {
                continue;
            }
            for (ModuleReference ref : ModuleFinder.of(entry).findAll()) {
                ModuleDescriptor d = ref.descriptor();
                if (d.name().startsWith("openshell.") && !d.name().startsWith("openshell.tests")) {
                    modules.put(d.name(), d);
                }
            }
        }
        return modules;
    }

    static Stream<String> moduleNames() {
        return productModules().keySet().stream();
    }

    static String render(ModuleDescriptor d) {
        List<String> lines = new ArrayList<>();
        lines.add((d.isOpen() ? "open module " : "module ") + d.name());
        new TreeSet<>(d.requires().stream().filter(r -> !r.name().equals("java.base"))
                .map(r -> "requires " + r.modifiers().stream().map(m -> m.name().toLowerCase() + " ")
                        .sorted().collect(Collectors.joining()) + r.name())
                .toList()).forEach(lines::add);
        new TreeSet<>(d.exports().stream().map(e -> "exports " + e.source()
                + (e.isQualified() ? " to " + new TreeSet<>(e.targets()) : "")).toList()).forEach(lines::add);
        new TreeSet<>(d.opens().stream().map(o -> "opens " + o.source()
                + (o.isQualified() ? " to " + new TreeSet<>(o.targets()) : "")).toList()).forEach(lines::add);
        new TreeSet<>(d.uses()).forEach(u -> lines.add("uses " + u));
        new TreeSet<>(d.provides().stream().map(p -> "provides " + p.service() + " with "
                + new TreeSet<>(p.providers())).toList()).forEach(lines::add);
        return String.join("\n", lines) + "\n";
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("moduleNames")
    void descriptorMatchesSnapshot(String module) throws IOException {
        String actual = render(productModules().get(module));
        Path snapshot = SNAPSHOTS.resolve(module + ".txt");
        if (UPDATE) {
            Files.createDirectories(SNAPSHOTS);
            Files.writeString(snapshot, actual);
        }
        assertEquals(Files.exists(snapshot) ? Files.readString(snapshot) : "(no snapshot " + snapshot + ")", actual,
                "descriptor of " + module + " changed; if on purpose, run with -Dopenshell.descriptors.update=true");
    }

    @Test
    void everySnapshotHasItsModuleAndEveryModuleIsChecked() throws IOException {
        Map<String, ModuleDescriptor> modules = productModules();
        assertFalse(modules.isEmpty(), "no openshell module found on the test's module path");
        try (Stream<Path> files = Files.list(SNAPSHOTS)) {
            TreeSet<String> snapshots = files.map(p -> p.getFileName().toString())
                    .filter(n -> n.endsWith(".txt")).map(n -> n.substring(0, n.length() - 4))
                    .collect(Collectors.toCollection(TreeSet::new));
            assertEquals(snapshots, new TreeSet<>(modules.keySet()),
                    "snapshots and product modules differ: add the module to tests/descriptors/pom.xml or delete the stale snapshot");
        }
    }
}
