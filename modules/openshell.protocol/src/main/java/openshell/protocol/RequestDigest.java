package openshell.protocol;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;

import com.google.protobuf.ByteString;
import com.google.protobuf.CodedOutputStream;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.Message;

import openshell.protocol.wire.RequestHeader;

/**
 * The canonical digest of a control request: SHA-256 of its deterministic protobuf encoding
 * with the {@code header} field cleared, so the digest never covers itself or the id.
 */
public final class RequestDigest {
    private RequestDigest() {
    }

    /**
     * The digest of a request.
     *
     * @param request a control request with a {@code header} field
     * @return 32 bytes
     */
    public static ByteString of(Message request) {
        FieldDescriptor header = headerField(request);
        Message canonical = request.toBuilder().clearField(header).build();
        try {
            ByteArrayOutputStream bytes = new ByteArrayOutputStream(canonical.getSerializedSize());
            CodedOutputStream out = CodedOutputStream.newInstance(bytes);
            out.useDeterministicSerialization();
            canonical.writeTo(out);
            out.flush();
            MessageDigest sha = MessageDigest.getInstance("SHA-256");
            return ByteString.copyFrom(sha.digest(bytes.toByteArray()));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is mandatory in every JDK", e);
        }
    }

    /**
     * Stamps a request with an id and its digest, as a caller sends it.
     *
     * @param request   the request (its header is replaced)
     * @param requestId the caller's request id
     * @param <T>       the request type
     * @return the stamped request
     */
    @SuppressWarnings("unchecked")
    public static <T extends Message> T stamp(T request, String requestId) {
        RequestHeader header = RequestHeader.newBuilder().setRequestId(requestId).setDigest(of(request)).build();
        return (T) request.toBuilder().setField(headerField(request), header).build();
    }

    /**
     * The header of a request.
     *
     * @param request a control request
     * @return its header
     */
    static RequestHeader headerOf(Message request) {
        return (RequestHeader) request.getField(headerField(request));
    }

    private static FieldDescriptor headerField(Message request) {
        FieldDescriptor header = request.getDescriptorForType().findFieldByName("header");
        if (header == null || header.getMessageType() != RequestHeader.getDescriptor()) {
            throw new ProtocolException(Refusal.INVALID_ARGUMENT,
                    request.getDescriptorForType().getFullName() + " is not a control request");
        }
        return header;
    }
}
