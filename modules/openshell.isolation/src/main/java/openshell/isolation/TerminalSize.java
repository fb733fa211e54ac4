package openshell.isolation;

/**
 * A terminal's size in character cells.
 *
 * @param columns 1..65535
 * @param rows    1..65535
 */
public record TerminalSize(int columns, int rows) {
    /** Validates the size. */
    public TerminalSize {
        if (columns < 1 || columns > 0xffff || rows < 1 || rows > 0xffff) {
            throw BackendException.invalid("terminal size out of range: " + columns + "x" + rows);
        }
    }
}
