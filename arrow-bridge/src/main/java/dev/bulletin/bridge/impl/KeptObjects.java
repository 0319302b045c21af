package dev.bulletin.bridge.impl;

import dev.bulletin.bridge.ObjectId;
import dev.bulletin.bridge.ObjectKey;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.Path;
import java.util.function.ObjLongConsumer;
import java.util.stream.Stream;

/**
 * The objects an earlier run of a store left in its folder (a runtime restarted from its
 * journal keeps them). Objects appear only by rename once complete, so every {@code ns/id}
 * file is a whole object; the dot-files beside them (temporaries, staged uploads, results an
 * executor had not committed) belonged to writes the crash cut short and are deleted.
 */
final class KeptObjects {

  private KeptObjects() { }

  /** Reports each object file of {@code folder} (namespace folders of id files). */
  static void scan(Path folder, ObjLongConsumer<ObjectKey> found) throws IOException {
    if (!Files.isDirectory(folder)) {
      return;
    }
    try (Stream<Path> namespaces = Files.list(folder)) {
      for (Path namespace : (Iterable<Path>) namespaces::iterator) {
        if (!Files.isDirectory(namespace) || namespace.getFileName().toString().startsWith(".")) {
          continue;
        }
        String namespaceName = namespace.getFileName().toString();
        try (Stream<Path> files = Files.list(namespace)) {
          for (Path file : (Iterable<Path>) files::iterator) {
            String name = file.getFileName().toString();
            if (ObjectId.isValid(name)) {
              // One stat per file: a restart may find 100,000 objects here.
              BasicFileAttributes attributes = Files.readAttributes(file,
                  BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
              if (attributes.isRegularFile()) {
                found.accept(new ObjectKey(namespaceName, ObjectId.parse(name)),
                    attributes.size());
              }
            } else if (name.startsWith(".")) {
              Files2.deleteQuietly(file);
            }
          }
        }
      }
    }
  }
}
