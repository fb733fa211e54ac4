package openshell.isolation.conformance.selftest;

import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;

/** A probe program: prints one line of the given number of characters and exits. */
final class LineProbe {
    private LineProbe() {
    }

    static void main(String[] args) throws IOException {
        int length = Integer.parseInt(args[0]);
        OutputStream out = new BufferedOutputStream(System.out);
        for (int i = 0; i < length; i++) {
            out.write('x');
        }
        out.write('\n');
        out.flush();
    }
}
