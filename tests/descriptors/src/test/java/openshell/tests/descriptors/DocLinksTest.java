package openshell.tests.descriptors;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The project's docs live in the repository: every relative link in the README, {@code docs/}
 * and the other Markdown pages of a clean clone leads to a file or folder inside it.
 */
class DocLinksTest {
    private static final Path ROOT = Path.of("../..").toAbsolutePath().normalize();
    private static final Pattern LINK = Pattern.compile("\\]\\(([^)\\s]+)\\)");

    @Test
    void everyRelativeLinkLeadsInsideTheRepository() throws IOException {
        List<String> broken = new ArrayList<>();
        for (Path page : pages()) {
            Matcher m = LINK.matcher(Files.readString(page, StandardCharsets.UTF_8));
            while (m.find()) {
                String target = m.group(1).replaceFirst("#.*$", "");
                if (target.isEmpty() || target.matches("[a-z][a-z0-9+.-]*:.*")) {
                    continue;
                }
                Path resolved = page.getParent().resolve(target).normalize();
                if (!resolved.startsWith(ROOT) || !Files.exists(resolved)) {
                    broken.add(ROOT.relativize(page) + " -> " + m.group(1));
                }
            }
        }
        assertEquals(List.of(), broken, "links that leave the repository or lead nowhere");
    }

    private static List<Path> pages() throws IOException {
        try (Stream<Path> files = Files.walk(ROOT)) {
            return files.filter(p -> p.toString().endsWith(".md"))
                    .filter(p -> !ROOT.relativize(p).toString().contains("target/") && !ROOT.relativize(p).startsWith(".git"))
                    .sorted().toList();
        }
    }
}
