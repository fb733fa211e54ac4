package openshell.tests.descriptors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
 * {@code docs/limits.md} is the bounds tables of every module's descriptor Javadoc, in one
 * place, so an operator reads every bound, its owner and what happens at it without opening the
 * sources. The module docs stay the source: this test fails when the page no longer matches them
 * ({@code -Dopenshell.limits.update=true} rewrites it).
 */
class LimitsDocTest {
    private static final boolean UPDATE = Boolean.getBoolean("openshell.limits.update");
    private static final Path ROOT = Path.of("../..");
    private static final Path PAGE = ROOT.resolve("docs/limits.md");
    private static final Pattern TABLE = Pattern.compile("<table>(.*?)</table>", Pattern.DOTALL);
    private static final Pattern CAPTION = Pattern.compile("<caption>(.*?)</caption>", Pattern.DOTALL);
    private static final Pattern ROW = Pattern.compile("<tr>(.*?)</tr>", Pattern.DOTALL);
    private static final Pattern CELL = Pattern.compile("<t[hd]>(.*?)</t[hd]>", Pattern.DOTALL);
    private static final Pattern INLINE_TAG = Pattern.compile("\\{@(code|link|linkplain) ([^{}]*)\\}");

    @Test
    void theLimitsPageIsTheModulesBoundsTables() throws IOException {
        String expected = page();
        if (UPDATE) {
            Files.writeString(PAGE, expected, StandardCharsets.UTF_8);
        }
        assertTrue(Files.exists(PAGE), PAGE + " is missing; run with -Dopenshell.limits.update=true");
        assertEquals(expected, Files.readString(PAGE, StandardCharsets.UTF_8),
                "docs/limits.md differs from the modules' bounds tables; if on purpose, run with -Dopenshell.limits.update=true");
    }

    @Test
    void everyModuleHasABoundsTable() throws IOException {
        for (Path info : moduleInfos()) {
            assertTrue(TABLE.matcher(javadoc(info)).find(), info + " has no bounds table (STYLE.md: limits as tables)");
        }
    }

    private static String page() throws IOException {
        StringBuilder b = new StringBuilder("""
                # Limits

                Every bound the system enforces, by the module that owns it: its constant, its value, and what
                happens at it. Generated from each module's descriptor Javadoc (`module-info.java`), which stays
                the source; `tests/descriptors`' `LimitsDocTest` fails when this page drifts from it
                (`./mvnw -B -pl tests/descriptors verify -Dopenshell.limits.update=true` rewrites it).
                """);
        for (Path info : moduleInfos()) {
            String module = info.getParent().getParent().getParent().getParent().getFileName().toString();
            b.append("\n## ").append(module).append('\n');
            Matcher table = TABLE.matcher(javadoc(info));
            while (table.find()) {
                Matcher caption = CAPTION.matcher(table.group(1));
                if (caption.find()) {
                    b.append('\n').append(text(caption.group(1))).append(":\n");
                }
                b.append('\n');
                Matcher row = ROW.matcher(table.group(1));
                boolean header = true;
                while (row.find()) {
                    List<String> cells = new ArrayList<>();
                    Matcher cell = CELL.matcher(row.group(1));
                    while (cell.find()) {
                        cells.add(text(cell.group(1)).replace("|", "\\|"));
                    }
                    b.append("| ").append(String.join(" | ", cells)).append(" |\n");
                    if (header) {
                        b.append("|").append("---|".repeat(cells.size())).append('\n');
                        header = false;
                    }
                }
            }
        }
        return b.toString();
    }

    private static List<Path> moduleInfos() throws IOException {
        try (Stream<Path> modules = Files.list(ROOT.resolve("modules"))) {
            return modules.map(m -> m.resolve("src/main/java/module-info.java")).filter(Files::isRegularFile).sorted().toList();
        }
    }

    /** The module's Javadoc comment with the leading asterisks gone. */
    private static String javadoc(Path info) throws IOException {
        String source = Files.readString(info, StandardCharsets.UTF_8);
        int start = source.indexOf("/**");
        int end = source.indexOf("*/", start);
        if (start < 0 || end < 0) {
            return "";
        }
        StringBuilder b = new StringBuilder();
        for (String line : source.substring(start + 3, end).split("\n")) {
            b.append(line.replaceFirst("^\\s*\\* ?", "")).append('\n');
        }
        return b.toString();
    }

    private static String text(String html) {
        String s = INLINE_TAG.matcher(html).replaceAll(m -> Matcher.quoteReplacement(
                "`" + m.group(2).strip().replaceFirst("^[a-z.]+\\.(?=[A-Z])", "").replace('#', '.') + "`"));
        s = s.replaceAll("<[^>]+>", "").replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&");
        return s.replaceAll("\\s+", " ").strip();
    }
}
