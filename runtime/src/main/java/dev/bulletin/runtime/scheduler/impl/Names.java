package dev.bulletin.runtime.scheduler.impl;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** Interns names to dense ids so per-user and per-group counters are arrays. */
final class Names {
  private final Map<String, Integer> ids = new HashMap<>();
  private final List<String> names = new ArrayList<>();

  int id(String name) {
    Integer id = ids.get(name);
    if (id == null) {
      id = names.size();
      ids.put(name, id);
      names.add(name);
    }
    return id;
  }

  /** The id, or -1 for a name never interned. */
  int find(String name) {
    Integer id = ids.get(name);
    return id == null ? -1 : id;
  }

  String name(int id) {
    return names.get(id);
  }

  int size() {
    return names.size();
  }
}
