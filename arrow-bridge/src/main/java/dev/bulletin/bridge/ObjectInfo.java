package dev.bulletin.bridge;

/**
 * What the store knows about one object, read from the object's Arrow IPC schema message (the
 * payload is never read for it).
 *
 * @param kind the schema's {@code bulletin.kind} metadata ("tensor", "table", "pickle"), or
 *     "unknown" for bytes that are not a bulletin Arrow object
 * @param format the schema's {@code bulletin.format} metadata, or ""
 * @param schema the Arrow schema as text, or "" when the bytes are not Arrow IPC
 * @param spilled whether the bytes sit in the spill folder (on disk) rather than in memory
 */
public record ObjectInfo(ObjectKey key, long size, String kind, String format, String schema,
    int references, boolean spilled) {}
