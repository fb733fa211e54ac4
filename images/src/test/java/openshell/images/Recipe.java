package openshell.images;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * One Dockerfile, read the way the tests need it: its declared build context (a {@code # context:}
 * header naming a directory of the build output) and its instructions.
 *
 * @param file        the Dockerfile
 * @param context     the build context, relative to the repository
 * @param instructions each instruction (keyword upper-cased, then the rest), comments dropped
 */
record Recipe(Path file, String context, List<String[]> instructions) {
    private static final Pattern CONTEXT = Pattern.compile("^#\\s*context:\\s*(\\S+)\\s*$");
    private static final Pattern EXEC_FORM = Pattern.compile("^\\[(.*)]$");

    static Recipe read(Path file) throws IOException {
        String context = null;
        List<String[]> instructions = new ArrayList<>();
        for (String line : Files.readAllLines(file)) {
            Matcher m = CONTEXT.matcher(line);
            if (m.matches()) {
                context = m.group(1);
            } else if (!line.isBlank() && !line.startsWith("#")) {
                String[] parts = line.trim().split("\\s+", 2);
                instructions.add(new String[] {parts[0].toUpperCase(java.util.Locale.ROOT), parts.length > 1 ? parts[1] : ""});
            }
        }
        if (context == null) {
            throw new IllegalArgumentException(file + " has no '# context:' header");
        }
        return new Recipe(file, context, instructions);
    }

    List<String> all(String keyword) {
        return instructions.stream().filter(i -> i[0].equals(keyword)).map(i -> i[1]).toList();
    }

    Optional<String> last(String keyword) {
        List<String> values = all(keyword);
        return values.isEmpty() ? Optional.empty() : Optional.of(values.getLast());
    }

    /** The exec-form words of ENTRYPOINT, or empty if it is missing or in shell form. */
    List<String> entryPoint() {
        Optional<String> entry = last("ENTRYPOINT");
        if (entry.isEmpty()) {
            return List.of();
        }
        Matcher m = EXEC_FORM.matcher(entry.get().trim());
        if (!m.matches()) {
            return List.of();
        }
        List<String> words = new ArrayList<>();
        Matcher word = Pattern.compile("\"((?:[^\"\\\\]|\\\\.)*)\"").matcher(m.group(1));
        while (word.find()) {
            words.add(word.group(1));
        }
        return words;
    }
}
