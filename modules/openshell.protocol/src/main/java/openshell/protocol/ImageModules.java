package openshell.protocol;

import java.io.IOException;
import java.lang.module.ResolvedModule;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;

/**
 * Checks that a program started from its image (the sandbox runtime, the supervisor) loads every
 * application module from that image's own {@code app/} directory.
 *
 * <p>Why: the image's AOT cache archives the boot layer's module graph, and with it each module's
 * location as the training run saw it. A cache trained with a module path that named the build
 * directory kept that directory's jar URLs: a moved image (a container's {@code /opt/openshell},
 * a workload image) then read its service files from the build's jars, or failed deep inside a
 * service lookup once they were gone. The images' module path is {@code /proc/self/cwd/app} for
 * that reason (the launcher's working directory is the image); this check turns any other
 * location into a clear refusal before anything is served.
 */
public final class ImageModules {
    private ImageModules() {
    }

    /**
     * @param javaHome the running JVM's home ({@code java.home}): the image's directory when run from one
     * @throws IOException naming the first module loaded from outside {@code <image>/app}
     */
    public static void check(Path javaHome) throws IOException {
        Path app = javaHome.resolve("app");
        if (!Files.isDirectory(app)) {
            return; // not an image (a JDK running the build's module path): nothing archived to go stale
        }
        Path home = app.toRealPath();
        for (ResolvedModule module : ModuleLayer.boot().configuration().modules()) {
            Optional<URI> location = module.reference().location();
            if (location.isEmpty() || !"file".equals(location.get().getScheme())) {
                continue; // the JDK's own modules (jrt:)
            }
            Path jar = Path.of(location.get());
            Path real;
            try {
                real = jar.toRealPath();
            } catch (IOException e) {
                throw new IOException("module " + module.name() + " is at " + jar + ", which does not exist: this image's AOT "
                        + "cache was trained with another module path than its own app/ (" + home + ")", e);
            }
            if (!real.startsWith(home)) {
                throw new IOException("module " + module.name() + " is loaded from " + real + ", outside this image's app/ ("
                        + home + "): its AOT cache was trained with another module path");
            }
        }
    }
}
