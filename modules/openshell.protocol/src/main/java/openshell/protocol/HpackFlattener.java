package openshell.protocol;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.Iterator;

import io.helidon.common.buffers.BufferData;
import io.helidon.http.http2.Http2HuffmanDecoder;

/**
 * Rewrites each HPACK header block a client connection receives so that it no longer depends
 * on the connection's dynamic table: every field the peer sent by dynamic index, or asked to
 * be indexed, becomes a literal "without indexing" with the same name and value.
 *
 * <p>Why: Helidon 4.1.7's HTTP/2 client decodes a stream's headers on the thread that reads
 * the stream, against one dynamic table per connection. Two streams decoding at once race on
 * that table, and decode in an order other than the wire's, so a block that refers to an entry
 * another stream's block adds fails ("Dynamic table does not contain required header at index
 * ..."), and the link and every call on it fail with it (Helidon issue 10820, fixed in 4.3).
 * Here the dynamic table is kept once, on the connection's reader thread, in wire order; what
 * Helidon decodes afterwards refers to the static table only, so its own table stays empty and
 * the order its threads decode in does not matter.
 *
 * <p>Strings are passed on as they came (Huffman-coded or not); only lengths are decoded, to
 * size the table as RFC 7541 says. A block that is not valid HPACK is refused with
 * {@link HpackException}: the connection cannot be trusted to decode anything after it.
 *
 * <p>Not thread-safe: one instance per connection, used by its reader only.
 */
final class HpackFlattener {
    /**
     * The dynamic table size a peer may use, and the largest size update it may send: the HTTP/2
     * default of SETTINGS_HEADER_TABLE_SIZE, which the client never changes.
     */
    static final int MAX_TABLE_BYTES = 4096;
    /**
     * Largest header block (bytes, as received, over all of its frames) and largest block after
     * flattening: a gRPC response's headers and trailers are a few hundred bytes; beyond this the
     * peer is refused rather than held in memory.
     */
    static final int MAX_BLOCK_BYTES = 64 * 1024;
    /** Per-entry overhead RFC 7541 counts in the table size. */
    private static final int ENTRY_OVERHEAD = 32;
    /** An HPACK integer beyond this is not a length or index any valid block holds. */
    private static final int MAX_INTEGER = 1 << 24;

    /** RFC 7541 Appendix A: the static table's names, index 1 first. */
    private static final String[] STATIC_NAMES = {
        ":authority", ":method", ":method", ":path", ":path", ":scheme", ":scheme", ":status", ":status",
        ":status", ":status", ":status", ":status", ":status", "accept-charset", "accept-encoding",
        "accept-language", "accept-ranges", "accept", "access-control-allow-origin", "age", "allow",
        "authorization", "cache-control", "content-disposition", "content-encoding", "content-language",
        "content-length", "content-location", "content-range", "content-type", "cookie", "date", "etag",
        "expect", "expires", "from", "host", "if-match", "if-modified-since", "if-none-match", "if-range",
        "if-unmodified-since", "last-modified", "link", "location", "max-forwards", "proxy-authenticate",
        "proxy-authorization", "range", "referer", "refresh", "retry-after", "server", "set-cookie",
        "strict-transport-security", "transfer-encoding", "user-agent", "vary", "via", "www-authenticate",
    };
    static final int STATIC_ENTRIES = STATIC_NAMES.length;
    /** The static names as literals, built once: a dynamic entry named by static index holds one. */
    private static final Literal[] STATIC_LITERALS = staticLiterals();

    /**
     * A string literal as it came on the wire (its H bit, length and octets) and its decoded
     * length; for a name taken from the static table, its index there (else 0), because
     * Helidon's decoder takes a pseudo-header name only by index.
     */
    private record Literal(byte[] wire, int decodedLength, int staticIndex) {
    }

    /** One dynamic table entry. */
    private record Entry(Literal name, Literal value) {
        int size() {
            return name.decodedLength() + value.decodedLength() + ENTRY_OVERHEAD;
        }
    }

    /** Newest first, as HPACK indexes it. */
    private final ArrayDeque<Entry> table = new ArrayDeque<>();
    private final Http2HuffmanDecoder huffman = Http2HuffmanDecoder.create();
    private int tableBytes;
    private int maxTableBytes = MAX_TABLE_BYTES;

    /** Thrown for a block that is not valid HPACK or is past a bound. */
    static final class HpackException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        HpackException(String message) {
            super(message);
        }
    }

    /**
     * @param block one whole header block (the fragments of a HEADERS frame and its
     *              CONTINUATIONs, padding and priority removed)
     * @return the same fields, none referring to or changing the dynamic table
     * @throws HpackException for a malformed block, an unknown index or a block past a bound
     */
    byte[] flatten(byte[] block) {
        if (block.length > MAX_BLOCK_BYTES) {
            throw new HpackException("header block of " + block.length + " bytes, over " + MAX_BLOCK_BYTES);
        }
        ByteArrayOutputStream out = new ByteArrayOutputStream(block.length + 64);
        int[] at = {0};
        boolean fieldSeen = false;
        while (at[0] < block.length) {
            int first = block[at[0]] & 0xff;
            if ((first & 0x80) != 0) {
                int index = integer(block, at, 7);
                if (index == 0) {
                    throw new HpackException("indexed field with index 0");
                }
                if (index <= STATIC_ENTRIES) {
                    writeInteger(out, 0x80, 7, index);
                } else {
                    Entry entry = dynamic(index);
                    literal(out, 0x00, entry.name(), entry.value());
                }
                fieldSeen = true;
            } else if ((first & 0xc0) == 0x40) {
                int nameIndex = integer(block, at, 6);
                Literal name = nameIndex == 0 ? string(block, at) : nameOf(nameIndex);
                Literal value = string(block, at);
                literal(out, 0x00, name, value);
                add(new Entry(name, value));
                fieldSeen = true;
            } else if ((first & 0xe0) == 0x20) {
                if (fieldSeen) {
                    throw new HpackException("dynamic table size update after a header field");
                }
                int size = integer(block, at, 5);
                if (size > MAX_TABLE_BYTES) {
                    throw new HpackException("dynamic table size update to " + size + ", over " + MAX_TABLE_BYTES);
                }
                maxTableBytes = size;
                evictTo(maxTableBytes);
            } else {
                // 0000xxxx without indexing, 0001xxxx never indexed: the same form goes on, by name.
                int form = first & 0xf0;
                int nameIndex = integer(block, at, 4);
                Literal name = nameIndex == 0 ? string(block, at) : nameOf(nameIndex);
                literal(out, form, name, string(block, at));
                fieldSeen = true;
            }
            if (out.size() > MAX_BLOCK_BYTES) {
                throw new HpackException("flattened header block over " + MAX_BLOCK_BYTES + " bytes");
            }
        }
        return out.toByteArray();
    }

    /** @return bytes the dynamic table holds now (RFC 7541 sizes) */
    int tableBytes() {
        return tableBytes;
    }

    /** @return entries in the dynamic table now */
    int tableEntries() {
        return table.size();
    }

    private Entry dynamic(int index) {
        int position = index - STATIC_ENTRIES - 1;
        if (position >= table.size()) {
            throw new HpackException("index " + index + " past the dynamic table (" + table.size() + " entries)");
        }
        Iterator<Entry> entries = table.iterator();
        for (int i = 0; i < position; i++) {
            entries.next();
        }
        return entries.next();
    }

    private Literal nameOf(int index) {
        return index <= STATIC_ENTRIES ? STATIC_LITERALS[index - 1] : dynamic(index).name();
    }

    private static Literal[] staticLiterals() {
        Literal[] literals = new Literal[STATIC_NAMES.length];
        for (int i = 0; i < literals.length; i++) {
            byte[] name = STATIC_NAMES[i].getBytes(StandardCharsets.US_ASCII);
            ByteArrayOutputStream wire = new ByteArrayOutputStream(name.length + 1);
            writeInteger(wire, 0x00, 7, name.length);
            wire.writeBytes(name);
            literals[i] = new Literal(wire.toByteArray(), name.length, i + 1);
        }
        return literals;
    }

    private void add(Entry entry) {
        int size = entry.size();
        if (size > maxTableBytes) {
            // RFC 7541 4.4: an entry larger than the table empties it and is not added.
            evictTo(0);
            return;
        }
        evictTo(maxTableBytes - size);
        table.addFirst(entry);
        tableBytes += size;
    }

    private void evictTo(int bytes) {
        while (tableBytes > bytes) {
            tableBytes -= table.removeLast().size();
        }
    }

    private Literal string(byte[] block, int[] at) {
        int start = at[0];
        if (start >= block.length) {
            throw new HpackException("header block ends where a string should start");
        }
        boolean huffmanCoded = (block[start] & 0x80) != 0;
        int length = integer(block, at, 7);
        if (length > block.length - at[0]) {
            throw new HpackException("string of " + length + " bytes runs past the header block");
        }
        int decoded = length;
        if (huffmanCoded) {
            try {
                decoded = huffman.decodeString(BufferData.create(block, at[0], length), length).length();
            } catch (RuntimeException e) {
                throw new HpackException("malformed Huffman string: " + e.getMessage());
            }
        }
        at[0] += length;
        byte[] wire = new byte[at[0] - start];
        System.arraycopy(block, start, wire, 0, wire.length);
        return new Literal(wire, decoded, 0);
    }

    /**
     * Writes a literal field of the given form (0x00 without indexing, 0x10 never indexed): by its
     * static name index where the name has one, else with the name itself.
     */
    private static void literal(ByteArrayOutputStream out, int form, Literal name, Literal value) {
        if (name.staticIndex() > 0) {
            writeInteger(out, form, 4, name.staticIndex());
        } else {
            out.write(form);
            out.writeBytes(name.wire());
        }
        out.writeBytes(value.wire());
    }

    /** RFC 7541 5.1: reads an integer with an N-bit prefix at {@code at[0]} and moves past it. */
    static int integer(byte[] block, int[] at, int prefixBits) {
        if (at[0] >= block.length) {
            throw new HpackException("header block ends inside an integer");
        }
        int mask = (1 << prefixBits) - 1;
        int value = block[at[0]++] & mask;
        if (value < mask) {
            return value;
        }
        int shift = 0;
        while (true) {
            if (at[0] >= block.length) {
                throw new HpackException("header block ends inside an integer");
            }
            if (shift > 21) {
                throw new HpackException("integer of more than four continuation bytes");
            }
            int b = block[at[0]++] & 0xff;
            value += (b & 0x7f) << shift;
            if (value > MAX_INTEGER) {
                throw new HpackException("integer over " + MAX_INTEGER);
            }
            if ((b & 0x80) == 0) {
                return value;
            }
            shift += 7;
        }
    }

    /** RFC 7541 5.1: writes an integer with an N-bit prefix, the first byte's high bits from {@code form}. */
    static void writeInteger(ByteArrayOutputStream out, int form, int prefixBits, int value) {
        int mask = (1 << prefixBits) - 1;
        if (value < mask) {
            out.write(form | value);
            return;
        }
        out.write(form | mask);
        int rest = value - mask;
        while (rest >= 0x80) {
            out.write((rest & 0x7f) | 0x80);
            rest >>>= 7;
        }
        out.write(rest);
    }
}
