package openshell.linux;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * A classic BPF program for {@code seccomp(SECCOMP_SET_MODE_FILTER)}: immutable, at most
 * {@link #MAX_INSTRUCTIONS} instructions, encoded as the kernel's {@code struct sock_filter} array.
 * Built with {@link #builder()}, whose labels resolve forward jumps so a rule set reads top-down.
 */
public final class BpfProgram {
    /** The kernel's {@code BPF_MAXINSNS}: a longer program is refused with EINVAL. */
    public static final int MAX_INSTRUCTIONS = 4096;
    /** Bytes per instruction ({@code struct sock_filter}). */
    public static final int INSTRUCTION_BYTES = 8;

    static final int LD_W_ABS = 0x20;
    static final int JMP_JEQ_K = 0x15;
    static final int JMP_JGT_K = 0x25;
    static final int JMP_JGE_K = 0x35;
    static final int JMP_JSET_K = 0x45;
    static final int JMP_JA = 0x05;
    static final int ALU_AND_K = 0x54;
    static final int RET_K = 0x06;

    private final byte[] encoded;

    private BpfProgram(byte[] encoded) {
        this.encoded = encoded;
    }

    /** @return a new builder */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * Reads an encoded program, as sent in a launch plan.
     *
     * @param encoded {@code struct sock_filter} array bytes (little-endian)
     * @return the program
     * @throws LinuxException with EINVAL if empty, too long or not a whole number of instructions
     */
    public static BpfProgram decode(byte[] encoded) {
        if (encoded.length == 0 || encoded.length % INSTRUCTION_BYTES != 0
                || encoded.length / INSTRUCTION_BYTES > MAX_INSTRUCTIONS) {
            throw new LinuxException("bpf decode", Errno.EINVAL,
                    "program of " + encoded.length + " bytes (1.." + MAX_INSTRUCTIONS + " instructions of 8 bytes)");
        }
        return new BpfProgram(encoded.clone());
    }

    /** @return the number of instructions */
    public int length() {
        return encoded.length / INSTRUCTION_BYTES;
    }

    /** @return the {@code struct sock_filter} array, a copy */
    public byte[] encoded() {
        return encoded.clone();
    }

    byte[] encodedView() {
        return encoded;
    }

    /**
     * Runs the program on a {@code struct seccomp_data} the way the kernel would. Lets tests check
     * a filter's decisions for inputs the machine cannot produce (foreign ABIs, x32 numbers).
     *
     * @param nr   the system call number
     * @param arch the {@code AUDIT_ARCH_*} value
     * @param args the six arguments (fewer are padded with 0)
     * @return the returned action ({@code SECCOMP_RET_*} with data)
     */
    public int evaluate(int nr, int arch, long... args) {
        ByteBuffer data = ByteBuffer.allocate(64).order(ByteOrder.LITTLE_ENDIAN);
        data.putInt(0, nr).putInt(4, arch).putLong(8, 0);
        for (int i = 0; i < 6; i++) {
            data.putLong(16 + 8 * i, i < args.length ? args[i] : 0);
        }
        ByteBuffer code = ByteBuffer.wrap(encoded).order(ByteOrder.LITTLE_ENDIAN);
        int accumulator = 0;
        int pc = 0;
        while (pc < length()) {
            int op = code.getShort(pc * 8) & 0xffff;
            int jt = code.get(pc * 8 + 2) & 0xff;
            int jf = code.get(pc * 8 + 3) & 0xff;
            int k = code.getInt(pc * 8 + 4);
            pc++;
            switch (op) {
                case LD_W_ABS -> accumulator = data.getInt(k);
                case ALU_AND_K -> accumulator &= k;
                case JMP_JA -> pc += k;
                case JMP_JEQ_K -> pc += accumulator == k ? jt : jf;
                case JMP_JGT_K -> pc += Integer.compareUnsigned(accumulator, k) > 0 ? jt : jf;
                case JMP_JGE_K -> pc += Integer.compareUnsigned(accumulator, k) >= 0 ? jt : jf;
                case JMP_JSET_K -> pc += (accumulator & k) != 0 ? jt : jf;
                case RET_K -> {
                    return k;
                }
                default -> throw new LinuxException("bpf evaluate", Errno.EINVAL, "unsupported opcode " + op);
            }
        }
        throw new LinuxException("bpf evaluate", Errno.EINVAL, "program fell off its end");
    }

    /**
     * Assembles a program. Jumps name labels defined later ({@link #label}); every label must be
     * defined and every jump must be forward and at most 255 instructions (cBPF's limit).
     */
    public static final class Builder {
        private final List<int[]> instructions = new ArrayList<>();
        private final List<String[]> targets = new ArrayList<>();
        private final Map<String, Integer> labels = new HashMap<>();

        private Builder() {
        }

        private Builder add(int code, String jt, String jf, int k) {
            instructions.add(new int[] {code, 0, 0, k});
            targets.add(new String[] {jt, jf});
            return this;
        }

        /**
         * Loads the 32-bit word at an offset of {@code struct seccomp_data}.
         *
         * @param offset byte offset (0 nr, 4 arch, 16 + 8*i argument i, low word)
         * @return this
         */
        public Builder load(int offset) {
            if (offset < 0 || offset > 60 || offset % 4 != 0) {
                throw new LinuxException("bpf load", Errno.EINVAL, "offset " + offset + " outside seccomp_data");
            }
            return add(LD_W_ABS, null, null, offset);
        }

        /** Loads the system call number. @return this */
        public Builder loadNr() {
            return load(0);
        }

        /** Loads the architecture. @return this */
        public Builder loadArch() {
            return load(4);
        }

        /**
         * Loads the low 32 bits of an argument.
         *
         * @param index 0..5
         * @return this
         */
        public Builder loadArgLow(int index) {
            return load(16 + 8 * index);
        }

        /**
         * Loads the high 32 bits of an argument.
         *
         * @param index 0..5
         * @return this
         */
        public Builder loadArgHigh(int index) {
            return load(20 + 8 * index);
        }

        /**
         * {@code A &= mask}.
         *
         * @param mask the mask
         * @return this
         */
        public Builder and(int mask) {
            return add(ALU_AND_K, null, null, mask);
        }

        /**
         * Jumps to {@code label} if {@code A == value}, else falls through.
         *
         * @param value the constant
         * @param label where to go
         * @return this
         */
        public Builder jumpIfEqual(int value, String label) {
            return add(JMP_JEQ_K, label, null, value);
        }

        /**
         * Jumps to {@code label} if {@code A != value}, else falls through.
         *
         * @param value the constant
         * @param label where to go
         * @return this
         */
        public Builder jumpIfNotEqual(int value, String label) {
            return add(JMP_JEQ_K, null, label, value);
        }

        /**
         * Jumps to {@code label} if {@code A >= value} (unsigned), else falls through.
         *
         * @param value the constant
         * @param label where to go
         * @return this
         */
        public Builder jumpIfAtLeast(int value, String label) {
            return add(JMP_JGE_K, label, null, value);
        }

        /**
         * Jumps to {@code label} if {@code (A & mask) != 0}, else falls through.
         *
         * @param mask the bits
         * @param label where to go
         * @return this
         */
        public Builder jumpIfAnySet(int mask, String label) {
            return add(JMP_JSET_K, label, null, mask);
        }

        /**
         * Returns an action.
         *
         * @param action a {@code SECCOMP_RET_*} value with its data
         * @return this
         */
        public Builder ret(int action) {
            return add(RET_K, null, null, action);
        }

        /**
         * Defines a label at the next instruction.
         *
         * @param name a name not yet defined
         * @return this
         */
        public Builder label(String name) {
            if (labels.putIfAbsent(Objects.requireNonNull(name, "name"), instructions.size()) != null) {
                throw new LinuxException("bpf label", Errno.EINVAL, "label defined twice: " + name);
            }
            return this;
        }

        /**
         * Resolves labels and encodes.
         *
         * @return the program
         * @throws LinuxException with EINVAL for an undefined label, a backward or too long jump,
         *                        or more than {@link #MAX_INSTRUCTIONS} instructions
         */
        public BpfProgram build() {
            int count = instructions.size();
            if (count == 0 || count > MAX_INSTRUCTIONS) {
                throw new LinuxException("bpf build", Errno.EINVAL,
                        count + " instructions (1.." + MAX_INSTRUCTIONS + ")");
            }
            ByteBuffer out = ByteBuffer.allocate(count * INSTRUCTION_BYTES).order(ByteOrder.LITTLE_ENDIAN);
            for (int pc = 0; pc < count; pc++) {
                int[] insn = instructions.get(pc);
                String[] target = targets.get(pc);
                out.putShort((short) insn[0]);
                out.put((byte) offset(pc, target[0]));
                out.put((byte) offset(pc, target[1]));
                out.putInt(insn[3]);
            }
            return new BpfProgram(out.array());
        }

        private int offset(int pc, String label) {
            if (label == null) {
                return 0;
            }
            Integer at = labels.get(label);
            if (at == null) {
                throw new LinuxException("bpf build", Errno.EINVAL, "undefined label " + label);
            }
            int offset = at - pc - 1;
            if (offset < 0 || offset > 255) {
                throw new LinuxException("bpf build", Errno.EINVAL,
                        "jump to " + label + " spans " + offset + " instructions (forward, at most 255)");
            }
            return offset;
        }
    }
}
